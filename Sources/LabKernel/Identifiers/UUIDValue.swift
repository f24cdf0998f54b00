/// A UUID as its 16 bytes, big-endian in two words: what a hot path keeps instead of
/// the 36-character text (inline, no reference to count, hashed by its own bits). `text`
/// is the hyphenated lowercase form orch8 writes.
public struct UUIDValue: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// Bytes 0-7 and 8-15.
    public var high: UInt64
    public var low: UInt64

    public init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// The nil UUID, all zeros, which no random UUID is: what an empty slot holds.
    public static var zero: UUIDValue { UUIDValue(high: 0, low: 0) }

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

    /// Hyphenated lowercase text, written straight into the string's storage, a nibble
    /// at a time from the top (a hex digit is one comparison away; no table to index).
    public var text: String {
        String(unsafeUninitializedCapacity: 36) { out in
            var position = 0
            // `hyphensAfter`: bit n set writes a hyphen after nibble n (8-4-4 | 4-12).
            func write(_ word: UInt64, hyphensAfter: UInt16) {
                for nibble in 0..<16 {
                    let digit = UInt8(truncatingIfNeeded: word >> UInt64(60 - 4 * nibble)) & 0x0F
                    out[position] = digit < 10 ? digit &+ UInt8(ascii: "0") : digit &+ (UInt8(ascii: "a") - 10)
                    position += 1
                    if hyphensAfter >> UInt16(nibble) & 1 == 1 {
                        out[position] = UInt8(ascii: "-")
                        position += 1
                    }
                }
            }
            write(high, hyphensAfter: 1 << 7 | 1 << 11 | 1 << 15)
            write(low, hyphensAfter: 1 << 3)
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
