/// UUIDs as orch8 writes them: lowercase hyphenated text, drawn from a seeded stream.
public enum UUIDText {
    /// A random (version 4) UUID from `generator`.
    public static func random(using generator: inout SeededGenerator) -> String {
        let high = generator.next(), low = generator.next()
        // Written straight into the string's storage: every workflow instance gets one.
        return String(unsafeUninitializedCapacity: 36) { out in
            var position = 0
            for index in 0..<16 {
                var byte = UInt8(truncatingIfNeeded: (index < 8 ? high : low) >> (8 * (7 - UInt64(index & 7))))
                if index == 6 { byte = (byte & 0x0F) | 0x40 }
                if index == 8 { byte = (byte & 0x3F) | 0x80 }
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

    /// Whether `text` is a hyphenated UUID (any version, either case), as serde's `Uuid`
    /// accepts in JSON.
    public static func isValid(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard bytes.count == 36 else { return false }
        for (index, byte) in bytes.enumerated() {
            switch index {
            case 8, 13, 18, 23:
                guard byte == UInt8(ascii: "-") else { return false }
            default:
                let hex = (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte)
                    || (UInt8(ascii: "A")...UInt8(ascii: "F")).contains(byte)
                guard hex else { return false }
            }
        }
        return true
    }
}
