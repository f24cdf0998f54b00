/// A probability as an exact fraction (TigerBeetle's `Ratio`).
///
/// Scenario files give probabilities as decimals ("0.15") or percentages ("15%"); they are
/// parsed digit by digit into parts per billion, so no floating-point rounding decides
/// whether an event happens.
public struct Ratio: Hashable, Sendable, CustomStringConvertible {
    public let numerator: UInt32
    public let denominator: UInt32

    public init(numerator: UInt32, denominator: UInt32) {
        precondition(denominator > 0 && numerator <= denominator, "a ratio is between 0 and 1")
        self.numerator = numerator
        self.denominator = denominator
    }

    public static let zero = Ratio(numerator: 0, denominator: 1)
    public static let one = Ratio(numerator: 1, denominator: 1)

    public static let partsPerBillion: UInt32 = 1_000_000_000

    /// Parses "0.15", "15%", "1", "0"; nil when malformed or outside [0, 1].
    public init?(parsing text: String) {
        var body = Substring(text.trimmingWhitespace())
        var scale: UInt64 = 1_000_000_000
        if body.hasSuffix("%") {
            body = body.dropLast()
            scale = 10_000_000
        }
        let parts = body.split(separator: ".", omittingEmptySubsequences: false)
        guard !body.isEmpty, parts.count <= 2, body.allSatisfy({ $0 == "." || ("0"..."9").contains($0) }),
              let whole = UInt64(parts[0].isEmpty ? "0" : parts[0]), whole <= 100 else { return nil }
        var value = whole * scale
        if parts.count == 2 {
            var unit = scale
            for digit in parts[1] {
                guard let d = digit.wholeNumberValue else { return nil }
                unit /= 10
                guard unit > 0 || d == 0 else { return nil }
                value += UInt64(d) * unit
            }
        }
        guard value <= UInt64(Self.partsPerBillion) else { return nil }
        self.init(numerator: UInt32(value), denominator: Self.partsPerBillion)
    }

    public var fraction: Double { Double(numerator) / Double(denominator) }

    public var description: String {
        let ppb = UInt64(numerator) * UInt64(Self.partsPerBillion) / UInt64(denominator)
        var text = String(ppb / 10_000_000)
        let rest = ppb % 10_000_000
        if rest != 0 {
            var digits = String(rest)
            digits = String(repeating: "0", count: 7 - digits.count) + digits
            while digits.hasSuffix("0") { digits.removeLast() }
            text += "." + digits
        }
        return text + "%"
    }
}
