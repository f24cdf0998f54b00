/// A signed length of time in integer nanoseconds.
///
/// Not `Swift.Duration`: a single `Int64` keeps events small and arithmetic exact, and
/// 2^63 ns is about 292 years, far beyond any run.
///
/// Every constructor and operator saturates at ±2^63 ns instead of trapping: spans are
/// built from numbers clients send (a block timeout, a suspension, an RFC 3339 date), and
/// an overflow there must never take a server down. Inputs are validated at the boundary
/// with a precise error; saturation is what keeps a missed check from being a crash.
public struct TimeSpan: Hashable, Comparable, Sendable {
    public var nanoseconds: Int64

    @inlinable
    public init(nanoseconds: Int64) { self.nanoseconds = nanoseconds }

    public static let zero = TimeSpan(nanoseconds: 0)

    @inlinable public static func nanoseconds(_ n: Int64) -> TimeSpan { TimeSpan(nanoseconds: n) }
    @inlinable public static func microseconds(_ n: Int64) -> TimeSpan { TimeSpan(nanoseconds: saturating(n, times: 1_000)) }
    @inlinable public static func milliseconds(_ n: Int64) -> TimeSpan { TimeSpan(nanoseconds: saturating(n, times: 1_000_000)) }
    @inlinable public static func seconds(_ n: Int64) -> TimeSpan { TimeSpan(nanoseconds: saturating(n, times: 1_000_000_000)) }
    @inlinable public static func minutes(_ n: Int64) -> TimeSpan { TimeSpan(nanoseconds: saturating(n, times: 60_000_000_000)) }
    @inlinable public static func hours(_ n: Int64) -> TimeSpan { TimeSpan(nanoseconds: saturating(n, times: 3_600_000_000_000)) }
    @inlinable public static func days(_ n: Int64) -> TimeSpan { TimeSpan(nanoseconds: saturating(n, times: 86_400_000_000_000)) }

    /// `a * b`, or the bound of its sign when the product does not fit.
    @inlinable
    public static func saturating(_ a: Int64, times b: Int64) -> Int64 {
        let (product, overflow) = a.multipliedReportingOverflow(by: b)
        guard overflow else { return product }
        return (a < 0) != (b < 0) ? .min : .max
    }

    /// `a + b`, or the bound of its sign when the sum does not fit.
    @inlinable
    public static func saturating(_ a: Int64, plus b: Int64) -> Int64 {
        let (sum, overflow) = a.addingReportingOverflow(b)
        guard overflow else { return sum }
        return b > 0 ? .max : .min
    }

    /// Rounds a length in seconds given as a floating-point number (a sampled distribution)
    /// to whole nanoseconds, saturating instead of trapping on huge or non-finite values.
    @inlinable
    public static func approximately(seconds value: Double) -> TimeSpan { approximately(nanoseconds: value * 1e9) }

    /// Rounds a length in nanoseconds given as a floating-point number, saturating.
    @inlinable
    public static func approximately(nanoseconds value: Double) -> TimeSpan {
        let ns = value.rounded()
        guard ns.isFinite else { return TimeSpan(nanoseconds: value > 0 ? .max : 0) }
        if ns >= 9.2e18 { return TimeSpan(nanoseconds: .max) }
        if ns <= -9.2e18 { return TimeSpan(nanoseconds: .min) }
        return TimeSpan(nanoseconds: Int64(ns))
    }

    /// This length `factor` times over (a slowdown's stretch), to the nanosecond,
    /// saturating; exactly itself for a factor of 1.
    public func stretched(by factor: Double) -> TimeSpan {
        factor == 1 ? self : .approximately(nanoseconds: Double(nanoseconds) * factor)
    }

    @inlinable public var seconds: Double { Double(nanoseconds) / 1e9 }
    @inlinable public var milliseconds: Int64 { nanoseconds / 1_000_000 }

    @inlinable public static func < (lhs: TimeSpan, rhs: TimeSpan) -> Bool { lhs.nanoseconds < rhs.nanoseconds }
    @inlinable public static func + (lhs: TimeSpan, rhs: TimeSpan) -> TimeSpan {
        TimeSpan(nanoseconds: saturating(lhs.nanoseconds, plus: rhs.nanoseconds))
    }
    @inlinable public static func - (lhs: TimeSpan, rhs: TimeSpan) -> TimeSpan {
        let (difference, overflow) = lhs.nanoseconds.subtractingReportingOverflow(rhs.nanoseconds)
        return TimeSpan(nanoseconds: overflow ? (rhs.nanoseconds > 0 ? .min : .max) : difference)
    }
    @inlinable public static func * (lhs: TimeSpan, rhs: Int64) -> TimeSpan { TimeSpan(nanoseconds: saturating(lhs.nanoseconds, times: rhs)) }
    /// Division by zero is the caller's bug, not a client's: it still traps.
    @inlinable public static func / (lhs: TimeSpan, rhs: Int64) -> TimeSpan {
        TimeSpan(nanoseconds: lhs.nanoseconds == .min && rhs == -1 ? .max : lhs.nanoseconds / rhs)
    }
    @inlinable public static func += (lhs: inout TimeSpan, rhs: TimeSpan) { lhs = lhs + rhs }
}
