/// Text form of spans: "250ms", "6h", "1h30m", "1.5s", "2d", "90" (seconds).
///
/// Units: ns, us (or µs), ms, s, m, h, d. Fractions are parsed as exact decimals, never
/// through floating point, so "0.1s" is exactly 100,000,000 ns.
extension TimeSpan: CustomStringConvertible, LosslessStringConvertible {
    private static let units: [(suffix: String, nanoseconds: Int64)] = [
        ("ns", 1), ("us", 1_000), ("µs", 1_000), ("ms", 1_000_000),
        ("s", 1_000_000_000), ("m", 60_000_000_000), ("h", 3_600_000_000_000), ("d", 86_400_000_000_000),
    ]

    public init?(_ text: String) {
        let trimmed = text.trimmingWhitespace()
        guard !trimmed.isEmpty else { return nil }
        var total: Int64 = 0
        var rest = Substring(trimmed)
        let negative = rest.first == "-"
        if negative { rest = rest.dropFirst() }
        if rest.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ".") }) {
            guard let ns = Self.decimal(rest, scale: 1_000_000_000) else { return nil }
            self.init(nanoseconds: negative ? -ns : ns)
            return
        }
        while !rest.isEmpty {
            let number = rest.prefix { $0.isASCII && ($0.isNumber || $0 == ".") }
            guard !number.isEmpty else { return nil }
            rest = rest.dropFirst(number.count)
            let unitText = rest.prefix { !($0.isASCII && ($0.isNumber || $0 == ".")) }
            rest = rest.dropFirst(unitText.count)
            guard let unit = Self.units.first(where: { $0.suffix == unitText }),
                  let part = Self.decimal(number, scale: unit.nanoseconds) else { return nil }
            let (sum, overflow) = total.addingReportingOverflow(part)
            guard !overflow else { return nil }
            total = sum
        }
        self.init(nanoseconds: negative ? -total : total)
    }

    /// Parses "12.345" times `scale` exactly; nil on malformed input, overflow or a
    /// fraction finer than one nanosecond.
    private static func decimal(_ text: Substring, scale: Int64) -> Int64? {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count <= 2, let whole = Int64(parts[0].isEmpty ? "0" : parts[0]) else { return nil }
        var (result, overflow) = whole.multipliedReportingOverflow(by: scale)
        guard !overflow else { return nil }
        if parts.count == 2 {
            var unit = scale
            for digit in parts[1] {
                guard let d = digit.wholeNumberValue else { return nil }
                guard unit % 10 == 0 || d == 0 else { return nil }
                unit /= 10
                (result, overflow) = result.addingReportingOverflow(Int64(d) * unit)
                guard !overflow else { return nil }
            }
        }
        return result
    }

    /// The shortest exact rendering with the largest units: "1h30m", "250ms", "1.5s".
    public var description: String {
        if nanoseconds == 0 { return "0s" }
        if nanoseconds == .max { return "forever" }
        var ns = nanoseconds.magnitude
        var text = nanoseconds < 0 ? "-" : ""
        if ns % 1_000_000_000 != 0 && ns < 60_000_000_000 {
            for (suffix, unit) in [("ms", UInt64(1_000_000)), ("us", 1_000), ("ns", 1)] where ns % unit == 0 {
                if ns >= 1_000_000_000, suffix == "ms" {
                    let whole = ns / 1_000_000_000, frac = ns % 1_000_000_000
                    var fraction = String(frac)
                    fraction = String(repeating: "0", count: 9 - fraction.count) + fraction
                    while fraction.hasSuffix("0") { fraction.removeLast() }
                    return text + "\(whole).\(fraction)s"
                }
                return text + "\(ns / unit)\(suffix)"
            }
        }
        for (suffix, unit) in [("d", UInt64(86_400_000_000_000)), ("h", 3_600_000_000_000), ("m", 60_000_000_000), ("s", 1_000_000_000)] {
            if ns >= unit {
                text += "\(ns / unit)\(suffix)"
                ns %= unit
            }
        }
        if ns > 0 { text += "\(ns / 1_000_000)ms" }
        return text
    }
}

extension String {
    package func trimmingWhitespace() -> String {
        var view = Substring(self)
        while let first = view.first, first.isWhitespace { view = view.dropFirst() }
        while let last = view.last, last.isWhitespace { view = view.dropLast() }
        return String(view)
    }
}
