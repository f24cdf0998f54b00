public import LabKernel

/// When users' desktops are awake (the AI bridge's daemons, the desktop bridge's app):
/// from `awakeFrom` to `awakeUntil`, each desktop waking up to `jitter` later and closing
/// up to `jitter` earlier, drawn per day, and closed all day on `asleepShare` of days.
/// Read from the section it belongs to (`bridge:`, `desktop:`), beside its other keys.
public struct DeskHours: Sendable, Equatable {
    public var awakeFrom: TimeSpan = .hours(8)
    public var awakeUntil: TimeSpan = .hours(23)
    public var jitter: TimeSpan = .hours(1)
    public var asleepShare = Ratio(numerator: 10, denominator: 100)

    /// The keys, read from the section's own container (whose key type lists them too).
    static let keys = ["awakeFrom", "awakeUntil", "jitter", "asleepShare"]

    public init(awakeUntil: TimeSpan = .hours(23)) { self.awakeUntil = awakeUntil }

    /// Reads the keys from the section's container `c`, over `defaults`.
    init<Key: CodingKey>(from c: KeyedDecodingContainer<Key>, defaults: DeskHours) throws {
        self = defaults
        func key(_ name: String) -> Key { Key(stringValue: name)! }
        func fail(_ name: String, _ message: String) -> DecodingError {
            .dataCorrupted(.init(codingPath: c.codingPath + [key(name)], debugDescription: message))
        }
        for name in ["awakeFrom", "awakeUntil"] {
            guard let text = try c.decodeIfPresent(String.self, forKey: key(name)) else { continue }
            guard let time = text == "24:00" ? .hours(24) : parseTimeOfDay(text) else { throw fail(name, "expected a time of day like 08:00, found '\(text)'") }
            if name == "awakeFrom" { awakeFrom = time } else { awakeUntil = time }
        }
        guard awakeFrom >= .zero, awakeUntil <= .hours(24), awakeFrom < awakeUntil else {
            throw fail("awakeUntil", "awakeFrom < awakeUntil, both within the day (e.g. 08:00 and 23:00)")
        }
        jitter = try c.decodeIfPresent(TimeSpan.self, forKey: key("jitter")) ?? jitter
        guard jitter >= .zero, jitter <= .hours(6) else { throw fail("jitter", "0 to 6h") }
        asleepShare = try c.decodeIfPresent(Ratio.self, forKey: key("asleepShare")) ?? asleepShare
    }

    /// A desktop's next day from `now`: when it wakes and sleeps (the current day's
    /// times if it has not yet gone to sleep), and whether it stays closed.
    func day(from now: Instant, startAt: TimeSpan, stream: inout SeededGenerator) -> (wake: Instant, sleep: Instant, closed: Bool) {
        let length: Int64 = 86_400_000_000_000
        let clock = startAt.nanoseconds + now.nanoseconds
        let midnight = now - .nanoseconds(clock % length)
        var wake = midnight + awakeFrom + .nanoseconds(Int64(stream.nextUnit() * Double(jitter.nanoseconds)))
        var sleep = midnight + awakeUntil - .nanoseconds(Int64(stream.nextUnit() * Double(jitter.nanoseconds)))
        if sleep <= now { (wake, sleep) = (wake + .nanoseconds(length), sleep + .nanoseconds(length)) }
        return (wake, sleep, stream.chance(asleepShare))
    }
}
