import LabKernel

/// How a metric's values are stored and how people write bounds on them.
public enum MetricUnit: String, Sendable, Hashable {
    /// Durations, stored as integer nanoseconds; bounds are written as durations ("250ms").
    case nanoseconds = "ns"
    /// Plain counts; bounds are numbers.
    case count
    /// Seconds as a real number; bounds are numbers of seconds or durations.
    case seconds = "s"
    /// Battery percentages, stored as hundredths of a percent; bounds are percents.
    case centipercent = "0.01%"
    /// Events per hour; bounds are numbers.
    case perHour = "1/h"
    /// A percentage in [0, 100]; bounds are numbers.
    case percent = "%"
    /// Energy in joules; bounds are numbers.
    case joules = "J"
    /// Bytes; bounds are numbers.
    case bytes = "B"
    /// A part of a whole as a fraction (a ratio threshold's failures per request); bounds
    /// are percentages (`1%`) or fractions (`0.01`).
    case share = "ratio"

    /// Parses a bound as written in a scenario into the stored unit.
    public func parseBound(_ text: String) -> Double? {
        let cleaned = String(text.filter { $0 != "_" && $0 != "%" })
        switch self {
        case .share:
            let written = String(text.filter { $0 != "_" })
            guard let value = Double(written.hasSuffix("%") ? String(written.dropLast()) : written), value >= 0 else { return nil }
            return written.hasSuffix("%") ? value / 100 : value
        case .nanoseconds:
            // A bare number is ambiguous (seconds? milliseconds?), so durations need a unit.
            guard cleaned.contains(where: \.isLetter) else { return nil }
            return TimeSpan(cleaned).map { Double($0.nanoseconds) }
        case .seconds:
            if let value = Double(cleaned) { return value }
            return TimeSpan(cleaned)?.seconds
        case .centipercent:
            return Double(cleaned).map { $0 * 100 }
        case .count, .perHour, .percent, .joules, .bytes:
            return Double(cleaned)
        }
    }

    public var boundDescription: String {
        switch self {
        case .nanoseconds: return "a duration with a unit, like 250ms"
        case .seconds: return "a number of seconds or a duration"
        case .centipercent, .percent: return "a percentage like 20"
        case .count, .perHour: return "a number"
        case .joules: return "a number of joules"
        case .bytes: return "a number of bytes"
        case .share: return "a percentage like 1% or a fraction like 0.01"
        }
    }

    /// A stored value as people read it ("12.5ms", "43.2%", "1,200").
    public func format(_ value: Double) -> String {
        switch self {
        case .nanoseconds: return Self.formatDuration(value)
        case .seconds: return Self.formatDuration(value * 1e9)
        case .centipercent: return Self.decimal(value / 100, digits: 1) + "%"
        case .percent: return Self.decimal(value, digits: 1) + "%"
        case .count, .perHour: return Self.decimal(value, digits: value == value.rounded() ? 0 : 1)
        case .joules: return Self.decimal(value, digits: value < 100 ? 2 : 0) + " J"
        case .bytes: return Self.formatBytes(value)
        case .share: return Self.decimal(value * 100, digits: value < 0.001 ? 3 : 2) + "%"
        }
    }

    /// The unit of this metric's total divided by another's (a ratio threshold's `per`):
    /// a count per a count is a share (failures per request, bounded as `1%`); anything
    /// else keeps its unit (bytes per request).
    public var ratioUnit: MetricUnit { self == .count ? .share : self }

    /// A ratio in this unit (joules per device-second, bytes per request): plain numbers
    /// get three significant digits below 10, where `format` would round them to nothing.
    public func formatRatio(_ value: Double) -> String {
        switch self {
        case .count, .perHour, .joules:
            guard value != 0, abs(value) < 10 else { return format(value) }
            var digits = 2, magnitude = abs(value)
            while magnitude < 1 && digits < 9 {
                magnitude *= 10
                digits += 1
            }
            return Self.decimal(value, digits: digits) + (self == .joules ? " J" : "")
        case .nanoseconds, .seconds, .centipercent, .percent, .bytes, .share:
            return format(value)
        }
    }

    /// "840 B", "12.3 KiB", "4.1 MiB", "2.0 GiB".
    public static func formatBytes(_ bytes: Double) -> String {
        let a = abs(bytes)
        if a < 1_024 { return decimal(bytes, digits: 0) + " B" }
        if a < 1_048_576 { return decimal(bytes / 1_024, digits: 1) + " KiB" }
        if a < 1_073_741_824 { return decimal(bytes / 1_048_576, digits: 1) + " MiB" }
        return decimal(bytes / 1_073_741_824, digits: 1) + " GiB"
    }

    public static func formatDuration(_ ns: Double) -> String {
        let a = abs(ns)
        if a < 1_000 { return decimal(ns, digits: 0) + "ns" }
        if a < 1_000_000 { return decimal(ns / 1_000, digits: 1) + "µs" }
        if a < 1_000_000_000 { return decimal(ns / 1_000_000, digits: 1) + "ms" }
        if a < 10e9 { return decimal(ns / 1e9, digits: 2) + "s" }
        if a < 120e9 { return decimal(ns / 1e9, digits: 1) + "s" }
        if a < 7_200e9 { return decimal(ns / 60e9, digits: 1) + "m" }
        return decimal(ns / 3_600e9, digits: 1) + "h"
    }

    /// Fixed-point rendering without Foundation's locale-dependent formatters.
    public static func decimal(_ value: Double, digits: Int) -> String {
        guard value.isFinite else { return value.isNaN ? "n/a" : (value > 0 ? "∞" : "-∞") }
        var scale = 1.0
        for _ in 0..<digits { scale *= 10 }
        let scaled = (abs(value) * scale).rounded()
        let whole = UInt64(scaled / scale)
        let fraction = UInt64(scaled - Double(whole) * scale)
        var text = String(whole)
        var grouped = ""
        for (i, ch) in text.reversed().enumerated() {
            if i > 0 && i % 3 == 0 { grouped.append(",") }
            grouped.append(ch)
        }
        text = String(grouped.reversed())
        if digits > 0 {
            var f = String(fraction)
            f = String(repeating: "0", count: digits - f.count) + f
            text += "." + f
        }
        return (value < 0 && scaled != 0 ? "-" : "") + text
    }
}
