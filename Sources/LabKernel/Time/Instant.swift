/// A point in time, as integer nanoseconds since the origin of a run.
///
/// In simulation the origin is the scenario's start; in live mode it is the moment the
/// driver started its monotonic clock. Cores never read a clock: they receive an
/// `Instant` with every input.
public struct Instant: Hashable, Comparable, Sendable, CustomStringConvertible {
    public var nanoseconds: Int64

    @inlinable
    public init(nanoseconds: Int64) { self.nanoseconds = nanoseconds }

    public static let zero = Instant(nanoseconds: 0)
    /// Later than every instant a run can reach; used as "never".
    public static let distantFuture = Instant(nanoseconds: .max)

    @inlinable
    public static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.nanoseconds < rhs.nanoseconds }

    /// Saturates, like `TimeSpan`'s operators: a far-off deadline is "never", not a trap.
    @inlinable
    public static func + (lhs: Instant, rhs: TimeSpan) -> Instant {
        Instant(nanoseconds: TimeSpan.saturating(lhs.nanoseconds, plus: rhs.nanoseconds))
    }

    @inlinable
    public static func - (lhs: Instant, rhs: TimeSpan) -> Instant {
        Instant(nanoseconds: (TimeSpan(nanoseconds: lhs.nanoseconds) - rhs).nanoseconds)
    }

    @inlinable
    public static func - (lhs: Instant, rhs: Instant) -> TimeSpan {
        TimeSpan(nanoseconds: lhs.nanoseconds) - TimeSpan(nanoseconds: rhs.nanoseconds)
    }

    @inlinable
    public static func += (lhs: inout Instant, rhs: TimeSpan) { lhs = lhs + rhs }

    /// The time since the origin, printed as a span ("1h30m").
    public var description: String { "t+" + TimeSpan(nanoseconds: nanoseconds).description }
}

extension Instant: Codable {
    public init(from decoder: any Decoder) throws {
        self.init(nanoseconds: try decoder.singleValueContainer().decode(Int64.self))
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(nanoseconds)
    }
}
