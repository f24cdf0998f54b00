/// 32 bytes held as four words: a key, digest or public key that costs no allocation of
/// its own (an array of 32 bytes is a heap object of 64), in a table or in an array.
public struct Bytes32: Hashable, Comparable, Sendable {
    let words: (UInt64, UInt64, UInt64, UInt64)

    public static let byteCount = 32

    /// Nil unless `bytes` is exactly 32 bytes.
    public init?(_ bytes: [UInt8]) {
        guard bytes.count == Self.byteCount else { return nil }
        func word(_ at: Int) -> UInt64 { bytes[at..<at + 8].reduce(0) { $0 << 8 | UInt64($1) } }
        words = (word(0), word(8), word(16), word(24))
    }

    /// From 64 hex digits (either case); nil for anything else.
    public init?(hex: String) {
        guard hex.utf8.count == 64, let bytes = [UInt8](hex: hex) else { return nil }
        self.init(bytes)
    }

    public var bytes: [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(Self.byteCount)
        for word in [words.0, words.1, words.2, words.3] {
            for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: word >> UInt64(shift))) }
        }
        return bytes
    }

    /// Lowercase hex, 64 digits.
    public var hex: String { bytes.hexString }

    public static func == (a: Bytes32, b: Bytes32) -> Bool { a.words == b.words }

    /// Byte order (the words are big-endian).
    public static func < (a: Bytes32, b: Bytes32) -> Bool { a.words < b.words }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(words.0)
        hasher.combine(words.1)
        hasher.combine(words.2)
        hasher.combine(words.3)
    }
}

/// Coded as standard base64, as keys are written on the wire and in stores.
extension Bytes32: Codable {
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        guard let value = Base64.decode(try container.decode(String.self)).flatMap(Bytes32.init) else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "32 bytes in standard base64")
        }
        self = value
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(Base64.encode(bytes))
    }
}
