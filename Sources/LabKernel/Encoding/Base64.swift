/// Standard base64 (RFC 4648 §4, with padding), as orch8 manifests and keys use it.
public enum Base64 {
    static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
    static let values: [Int8] = {
        var table = [Int8](repeating: -1, count: 256)
        for (index, byte) in alphabet.enumerated() { table[Int(byte)] = Int8(index) }
        return table
    }()

    public static func encode(_ bytes: [UInt8]) -> String {
        var out = [UInt8]()
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var index = 0
        while index + 2 < bytes.count {
            let n = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8 | UInt32(bytes[index + 2])
            out += [alphabet[Int(n >> 18 & 63)], alphabet[Int(n >> 12 & 63)], alphabet[Int(n >> 6 & 63)], alphabet[Int(n & 63)]]
            index += 3
        }
        let rest = bytes.count - index
        if rest == 1 {
            let n = UInt32(bytes[index]) << 16
            out += [alphabet[Int(n >> 18 & 63)], alphabet[Int(n >> 12 & 63)], UInt8(ascii: "="), UInt8(ascii: "=")]
        } else if rest == 2 {
            let n = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8
            out += [alphabet[Int(n >> 18 & 63)], alphabet[Int(n >> 12 & 63)], alphabet[Int(n >> 6 & 63)], UInt8(ascii: "=")]
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Decodes padded standard base64; nil for anything else (wrong length, stray
    /// characters, bits set after the last byte).
    public static func decode(_ text: String) -> [UInt8]? {
        let input = Array(text.utf8)
        guard input.count % 4 == 0 else { return nil }
        var out = [UInt8]()
        out.reserveCapacity(input.count / 4 * 3)
        var index = 0
        while index < input.count {
            let last = index + 4 == input.count
            var n: UInt32 = 0
            var padding = 0
            for k in 0..<4 {
                let byte = input[index + k]
                if byte == UInt8(ascii: "=") {
                    guard last, k >= 2 else { return nil }
                    padding += 1
                    n <<= 6
                    continue
                }
                guard padding == 0 else { return nil }
                let value = values[Int(byte)]
                guard value >= 0 else { return nil }
                n = n << 6 | UInt32(value)
            }
            out.append(UInt8(n >> 16 & 0xFF))
            if padding < 2 { out.append(UInt8(n >> 8 & 0xFF)) } else if n & 0xFFFF != 0 { return nil }
            if padding < 1 { out.append(UInt8(n & 0xFF)) } else if n & 0xFF != 0 { return nil }
            index += 4
        }
        return out
    }
}

extension Array where Element == UInt8 {
    /// Parses lowercase or uppercase hexadecimal; nil for odd lengths or other characters.
    public init?(hex: String) {
        let digits = Array(hex.utf8)
        guard digits.count % 2 == 0 else { return nil }
        var out = [UInt8]()
        out.reserveCapacity(digits.count / 2)
        func value(_ c: UInt8) -> UInt8? {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
            default: return nil
            }
        }
        var index = 0
        while index < digits.count {
            guard let high = value(digits[index]), let low = value(digits[index + 1]) else { return nil }
            out.append(high << 4 | low)
            index += 2
        }
        self = out
    }
}

/// Base64 with the URL alphabet and no padding (RFC 7515 §2).
public enum Base64URL {
    public static func encode(_ bytes: [UInt8]) -> String {
        var text = Base64.encode(bytes)
        while text.hasSuffix("=") { text.removeLast() }
        return String(text.map { $0 == "+" ? "-" : $0 == "/" ? "_" : $0 })
    }

    public static func decode(_ text: String) -> [UInt8]? {
        guard text.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }) else { return nil }
        var standard = String(text.map { $0 == "-" ? "+" : $0 == "_" ? "/" : $0 })
        while standard.utf8.count % 4 != 0 { standard += "=" }
        return Base64.decode(standard)
    }
}
