/// The timers of one core: at most one deadline per timer kind.
///
/// Cores keep their timers as data and report the earliest as `nextDeadline`; the driver
/// (simulator or live) calls back when that instant arrives, and the core asks which
/// timers are due. Spurious wake-ups are harmless: nothing is due, nothing happens.
///
/// A core has a handful of timer kinds, so a linear array beats any tree; ties fire in
/// the order the timers were armed, which keeps runs deterministic.
public struct TimerTable<Timer: Hashable & Sendable>: Sendable {
    @usableFromInline
    struct Entry: Sendable {
        var timer: Timer
        var deadline: Instant
        var armedOrder: UInt64
    }

    @usableFromInline var entries: [Entry] = []
    @usableFromInline var nextOrder: UInt64 = 0

    public init() {}

    /// Arms `timer` for `deadline`, replacing an earlier setting of the same timer.
    public mutating func arm(_ timer: Timer, at deadline: Instant) {
        nextOrder += 1
        if let index = entries.firstIndex(where: { $0.timer == timer }) {
            entries[index].deadline = deadline
            entries[index].armedOrder = nextOrder
        } else {
            entries.append(Entry(timer: timer, deadline: deadline, armedOrder: nextOrder))
        }
    }

    /// Disarms `timer`; disarming an unarmed timer does nothing.
    public mutating func cancel(_ timer: Timer) {
        entries.removeAll { $0.timer == timer }
    }

    public func deadline(of timer: Timer) -> Instant? {
        entries.first { $0.timer == timer }?.deadline
    }

    public var isEmpty: Bool { entries.isEmpty }

    /// The earliest armed deadline, or nil when nothing is armed.
    public var nextDeadline: Instant? {
        entries.min { ($0.deadline, $0.armedOrder) < ($1.deadline, $1.armedOrder) }?.deadline
    }

    /// Removes and returns the timers due at `now`, earliest first.
    public mutating func popExpired(now: Instant) -> [Timer] {
        guard entries.contains(where: { $0.deadline <= now }) else { return [] }
        let due = entries.filter { $0.deadline <= now }
            .sorted { ($0.deadline, $0.armedOrder) < ($1.deadline, $1.armedOrder) }
        entries.removeAll { $0.deadline <= now }
        return due.map(\.timer)
    }
}
