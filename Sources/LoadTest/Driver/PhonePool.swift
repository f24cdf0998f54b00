import Synchronization

/// The open model's phones: the idle ones, and arrivals waiting for one.
///
/// An arrival takes an idle phone; with none idle it waits, oldest first, and the next phone
/// to finish takes it. Its latency still counts from its arrival, so a server (or generator)
/// that cannot keep up shows as latency rising by the wait. An arrival that has waited
/// longer than `maxWait` when a phone frees up, or that finds `limit` arrivals already
/// waiting, is dropped and counted instead: the wait, and the memory it takes, stay bounded.
final class PhonePool: Sendable {
    struct State {
        var idle: [Int]
        var waiting: [ContinuousClock.Instant] = []
        var head = 0
        var count: Int { waiting.count - head }
    }

    enum Arrival: Equatable {
        case run(phone: Int)
        case wait
        case drop
    }

    let state: Mutex<State>
    let limit: Int
    let maxWait: Duration

    init(phones: Int, limit: Int, maxWait: Duration) {
        state = Mutex(State(idle: Array((0..<phones).reversed())))
        self.limit = max(1, limit)
        self.maxWait = maxWait
    }

    func arrive(at intended: ContinuousClock.Instant) -> Arrival {
        state.withLock { s in
            if let phone = s.idle.popLast() { return .run(phone: phone) }
            guard s.count < limit else { return .drop }
            s.waiting.append(intended)
            return .wait
        }
    }

    /// A phone finished at `now`: the arrival it takes next, or nil when it goes idle (no
    /// arrival waiting, or the run is ending); `expired` arrivals waited too long and are dropped.
    func next(for phone: Int, now: ContinuousClock.Instant, stopping: Bool) -> (intended: ContinuousClock.Instant?, expired: Int) {
        state.withLock { s in
            var expired = 0
            while !stopping, s.head < s.waiting.count {
                let arrival = s.waiting[s.head]
                s.head += 1
                if s.head > 1_024 && s.head * 2 > s.waiting.count {
                    s.waiting.removeFirst(s.head)
                    s.head = 0
                }
                if now - arrival <= maxWait { return (arrival, expired) }
                expired += 1
            }
            s.idle.append(phone)
            return (nil, expired)
        }
    }

    /// Arrivals still waiting when the run ends (never run: dropped).
    func drain() -> Int {
        state.withLock { s in
            defer { s.waiting = []; s.head = 0 }
            return s.count
        }
    }
}
