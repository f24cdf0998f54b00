/// UUIDs as orch8 writes them: lowercase hyphenated text, drawn from a seeded stream.
public enum UUIDText {
    /// A random (version 4) UUID from `generator`.
    public static func random(using generator: inout SeededGenerator) -> String {
        var bytes = [UInt8]()
        bytes.reserveCapacity(16)
        for _ in 0..<2 { withUnsafeBytes(of: generator.next().bigEndian) { bytes.append(contentsOf: $0) } }
        bytes[6] = (bytes[6] & 0x0F) | 0x40
        bytes[8] = (bytes[8] & 0x3F) | 0x80
        let c = Array(bytes.hexString)
        return String(c[0..<8]) + "-" + String(c[8..<12]) + "-" + String(c[12..<16]) + "-" + String(c[16..<20]) + "-" + String(c[20..<32])
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
