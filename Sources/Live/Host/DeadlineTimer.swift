import LabKernel
import Synchronization

/// One task sleeping until a core's next deadline, for a driver that feeds its core
/// `timerFired` (a phone's client core, the AI bridge daemon): arming again replaces the
/// task, so only the latest deadline the core asked for fires.
final class DeadlineTimer: Sendable {
    private let task = Mutex<Task<Void, Never>?>(nil)

    /// Sleeps until `deadline` (as far from `now` as it is), then runs `fire`; nil only
    /// cancels what was armed.
    func arm(_ deadline: Instant?, now: Instant, fire: @escaping @Sendable () async -> Void) {
        let next = deadline.map { deadline in
            Task {
                try? await Task.sleep(nanoseconds: UInt64(max(0, (deadline - now).nanoseconds)))
                guard !Task.isCancelled else { return }
                await fire()
            }
        }
        task.withLock { current in
            current?.cancel()
            current = next
        }
    }

    func cancel() {
        task.withLock { current in
            current?.cancel()
            current = nil
        }
    }
}
