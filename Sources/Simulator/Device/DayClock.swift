public import LabKernel

/// Maps run time to time of day. The run's origin falls at `startOffset` into day 0
/// (a scenario's `startAt`); all devices share one local time.
public struct DayClock: Hashable, Sendable {
    public static let day: Int64 = 86_400_000_000_000
    public var startOffset: Int64

    public init(startOffset: TimeSpan) {
        self.startOffset = ((startOffset.nanoseconds % Self.day) + Self.day) % Self.day
    }

    /// Nanoseconds since local midnight at `t`.
    @inlinable
    public func timeOfDay(_ t: Instant) -> Int64 {
        let raw = (startOffset + t.nanoseconds) % Self.day
        return raw < 0 ? raw + Self.day : raw
    }

    /// The first instant at or after `t` whose time of day is `tod`.
    @inlinable
    public func next(_ tod: Int64, atOrAfter t: Instant) -> Instant {
        var delta = tod - timeOfDay(t)
        if delta < 0 { delta += Self.day }
        return t + TimeSpan(nanoseconds: delta)
    }

    /// The first instant strictly after `t` whose time of day is `tod`.
    @inlinable
    public func next(_ tod: Int64, after t: Instant) -> Instant {
        let candidate = next(tod, atOrAfter: t)
        return candidate == t ? t + TimeSpan(nanoseconds: Self.day) : candidate
    }
}

/// A daily window [from, until) in time of day, which may wrap past midnight.
public struct DailyWindow: Hashable, Sendable {
    public var from: Int64
    public var until: Int64

    public init(from: Int64, until: Int64) {
        self.from = ((from % DayClock.day) + DayClock.day) % DayClock.day
        self.until = ((until % DayClock.day) + DayClock.day) % DayClock.day
    }

    /// Length of the window in nanoseconds (a full day when from == until).
    public var length: Int64 {
        let raw = until - from
        return raw <= 0 ? raw + DayClock.day : raw
    }

    public func contains(timeOfDay tod: Int64) -> Bool {
        from < until ? (tod >= from && tod < until) : (tod >= from || tod < until)
    }
}
