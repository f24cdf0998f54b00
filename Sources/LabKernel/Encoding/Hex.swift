/// The lowercase hexadecimal digits as UTF-8, for the writers that spell bytes out
/// (`hexString`, UUIDs, JSON `\u` escapes).
let lowercaseHexDigits: [UInt8] = Array("0123456789abcdef".utf8)

extension Array where Element == UInt8 {
    /// Lowercase hexadecimal, two digits per byte.
    public var hexString: String {
        let digits = lowercaseHexDigits
        var out = [UInt8]()
        out.reserveCapacity(count * 2)
        for byte in self {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
