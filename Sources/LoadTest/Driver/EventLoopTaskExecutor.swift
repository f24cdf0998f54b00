import NIOCore

/// Runs a task's jobs on one NIO event loop. A phone's iterations run where its socket's
/// events are handled, so a request goes out and its answer resumes the phone on the same
/// thread, without waking another (the cross-thread hand-offs were most of a request's
/// CPU in the generator's profile).
final class EventLoopTaskExecutor: TaskExecutor {
    let loop: any EventLoop

    init(_ loop: any EventLoop) { self.loop = loop }

    /// Waits until `instant` on the loop's own timer, resuming on the loop (a Swift clock's
    /// sleep wakes a Dispatch thread first, which cost a third of the generator's CPU).
    func sleep(until instant: ContinuousClock.Instant, clock: ContinuousClock) async {
        let wait = instant - clock.now
        guard wait > .zero else { return }
        let task = loop.scheduleTask(in: .nanoseconds(wait.nanoseconds)) {}
        _ = try? await task.futureResult.get()
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        loop.execute { job.runSynchronously(on: executor) }
    }
}
