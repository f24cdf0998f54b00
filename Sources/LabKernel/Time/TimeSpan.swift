/// A signed length of time in integer nanoseconds.
///
/// Not `Swift.Duration`: a single `Int64` keeps events small and arithmetic exact, and
/// 2^63 ns is about 292 years, far beyond any run.
public struct TimeSpan: Hashable, Comparable, Sendable {
    public var nanoseconds: Int64

    @inlinable
    public init(nanoseconds: Int64) { self.nanoseconds = nanoseconds }

    public static let zero = TimeSpan(nanoseconds: 0)

    @inlinable public static func nanoseconds(_ n: Int64) -> TimeSpan { TimeSpan(nanoseconds: n) }
    @inlinable public static func microseconds(_ n: Int64) -> TimeSpan { TimeSpan(nanoseconds: n * 1_000) }
    @inlinable public static func milliseconds(_ n: Int64) -> TimeSpan { TimeSpan(nanoseconds: n * 1_000_000) }
    @inlinable public static func seconds(_ n: Int64) -> TimeSpan { TimeSpan(nanoseconds: n * 1_000_000_000) }
    @inlinable public static func minutes(_ n: Int64) -> TimeSpan { .seconds(n * 60) }
    @inlinable public static func hours(_ n: Int64) -> TimeSpan { .seconds(n * 3_600) }
    @inlinable public static func days(_ n: Int64) -> TimeSpan { .seconds(n * 86_400) }

    /// Rounds a length in seconds given as a floating-point number (a sampled distribution)
    /// to whole nanoseconds, saturating instead of trapping on huge or non-finite values.
    @inlinable
    public static func approximately(seconds value: Double) -> TimeSpan {
        let ns = (value * 1e9).rounded()
        guard ns.isFinite else { return TimeSpan(nanoseconds: value > 0 ? .max : 0) }
        if ns >= 9.2e18 { return TimeSpan(nanoseconds: .max) }
        if ns <= -9.2e18 { return TimeSpan(nanoseconds: .min) }
        return TimeSpan(nanoseconds: Int64(ns))
    }

    @inlinable public var seconds: Double { Double(nanoseconds) / 1e9 }
    @inlinable public var milliseconds: Int64 { nanoseconds / 1_000_000 }

    @inlinable public static func < (lhs: TimeSpan, rhs: TimeSpan) -> Bool { lhs.nanoseconds < rhs.nanoseconds }
    @inlinable public static func + (lhs: TimeSpan, rhs: TimeSpan) -> TimeSpan { TimeSpan(nanoseconds: lhs.nanoseconds + rhs.nanoseconds) }
    @inlinable public static func - (lhs: TimeSpan, rhs: TimeSpan) -> TimeSpan { TimeSpan(nanoseconds: lhs.nanoseconds - rhs.nanoseconds) }
    @inlinable public static func * (lhs: TimeSpan, rhs: Int64) -> TimeSpan { TimeSpan(nanoseconds: lhs.nanoseconds * rhs) }
    @inlinable public static func / (lhs: TimeSpan, rhs: Int64) -> TimeSpan { TimeSpan(nanoseconds: lhs.nanoseconds / rhs) }
    @inlinable public static func += (lhs: inout TimeSpan, rhs: TimeSpan) { lhs.nanoseconds += rhs.nanoseconds }
}
