public import NIOCore

/// Runs a task's jobs on one NIO event loop (`withTaskExecutorPreference`). A load test's
/// phone's iterations run where its socket's events are handled, so a request goes out and
/// its answer resumes the phone on the same thread, without waking another (the
/// cross-thread hand-offs were most of a request's CPU in the generator's profile); and
/// nothing it awaits waits for a thread of Swift's cooperative pool, which other work
/// in the process may be holding.
public final class EventLoopTaskExecutor: TaskExecutor {
    public let loop: any EventLoop

    public init(_ loop: any EventLoop) { self.loop = loop }

    /// Waits until `instant` on the loop's own timer, resuming on the loop (a Swift clock's
    /// sleep wakes a Dispatch thread first, which cost a third of the generator's CPU).
    public func sleep(until instant: ContinuousClock.Instant, clock: ContinuousClock) async {
        let wait = instant - clock.now
        guard wait > .zero else { return }
        let task = loop.scheduleTask(in: TimeAmount(wait)) {}
        _ = try? await task.futureResult.get()
    }

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        loop.execute { job.runSynchronously(on: executor) }
    }
}
