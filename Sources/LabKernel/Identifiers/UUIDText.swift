/// A UUID as its 16 bytes, big-endian in two words: what a hot path keeps instead of
/// the 36-character text (inline, no reference to count, a two-word hash). `text` is the
/// hyphenated lowercase form orch8 writes.
public struct UUIDValue: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// Bytes 0-7 and 8-15.
    public var high: UInt64
    public var low: UInt64

    public init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// A random (version 4) UUID from `generator`: the same draws, and so the same UUID,
    /// as `UUIDText.random`.
    public static func random(using generator: inout SeededGenerator) -> UUIDValue {
        let high = generator.next(), low = generator.next()
        return UUIDValue(high: high & ~0xF000 | 0x4000, low: low & ~(0xC0 << 56) | (0x80 << 56))
    }

    /// Parses hyphenated text (any version, either case); nil for anything else.
    public init?(_ text: String) {
        var text = text
        let parsed: (UInt64, UInt64)? = text.withUTF8 { bytes in
            guard bytes.count == 36 else { return nil }
            var words: (UInt64, UInt64) = (0, 0)
            var digits = 0
            for (index, byte) in bytes.enumerated() {
                if index == 8 || index == 13 || index == 18 || index == 23 {
                    guard byte == UInt8(ascii: "-") else { return nil }
                    continue
                }
                let value: UInt8
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): value = byte &- UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): value = byte &- UInt8(ascii: "a") &+ 10
                case UInt8(ascii: "A")...UInt8(ascii: "F"): value = byte &- UInt8(ascii: "A") &+ 10
                default: return nil
                }
                if digits < 16 { words.0 = words.0 << 4 | UInt64(value) } else { words.1 = words.1 << 4 | UInt64(value) }
                digits += 1
            }
            return words
        }
        guard let (high, low) = parsed else { return nil }
        self.init(high: high, low: low)
    }

    /// Hyphenated lowercase text, written straight into the string's storage.
    public var text: String {
        String(unsafeUninitializedCapacity: 36) { out in
            var position = 0
            for index in 0..<16 {
                let byte = UInt8(truncatingIfNeeded: (index < 8 ? high : low) >> (8 * (7 - UInt64(index & 7))))
                if index == 4 || index == 6 || index == 8 || index == 10 {
                    out[position] = UInt8(ascii: "-")
                    position += 1
                }
                out[position] = lowercaseHexDigits[Int(byte >> 4)]
                out[position + 1] = lowercaseHexDigits[Int(byte & 0x0F)]
                position += 2
            }
            return position
        }
    }

    public var description: String { text }

    /// One word into the hasher, not two (equal UUIDs fold to equal words).
    public func hash(into hasher: inout Hasher) {
        hasher.combine(high ^ (low &* 0x9E37_79B9_7F4A_7C15))
    }

    public static func < (a: UUIDValue, b: UUIDValue) -> Bool { (a.high, a.low) < (b.high, b.low) }
}

/// UUIDs as orch8 writes them: lowercase hyphenated text, drawn from a seeded stream.
public enum UUIDText {
    /// A random (version 4) UUID from `generator`.
    public static func random(using generator: inout SeededGenerator) -> String { UUIDValue.random(using: &generator).text }

    /// Whether `text` is a hyphenated UUID (any version, either case), as serde's `Uuid`
    /// accepts in JSON.
    public static func isValid(_ text: String) -> Bool { UUIDValue(text) != nil }
}
