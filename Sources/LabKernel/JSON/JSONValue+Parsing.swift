/// A JSON text that could not be parsed, with where.
public struct JSONParseError: Error, Equatable, CustomStringConvertible, Sendable {
    public var message: String
    /// Byte offset, line and column (1-based) of the problem.
    public var offset: Int
    public var line: Int
    public var column: Int

    public var description: String { "line \(line), column \(column): \(message)" }
}

extension JSONValue {
    /// Parses RFC 8259 JSON. Duplicate object keys keep the last value (as most parsers
    /// do); nesting is limited to 512 levels so hostile input cannot exhaust the stack.
    public static func parse(_ text: String) throws(JSONParseError) -> JSONValue {
        var parser = JSONParser(bytes: Array(text.utf8))
        return try parser.parseDocument()
    }

    public static func parse(bytes: [UInt8]) throws(JSONParseError) -> JSONValue {
        var parser = JSONParser(bytes: bytes)
        return try parser.parseDocument()
    }
}

struct JSONParser {
    let bytes: [UInt8]
    var index = 0
    var depth = 0

    init(bytes: [UInt8]) { self.bytes = bytes }

    mutating func parseDocument() throws(JSONParseError) -> JSONValue {
        skipWhitespace()
        let value = try parseValue()
        skipWhitespace()
        guard index == bytes.count else { throw fail("unexpected text after the JSON value") }
        return value
    }

    func fail(_ message: String) -> JSONParseError {
        var line = 1, column = 1
        for byte in bytes[..<min(index, bytes.count)] {
            if byte == 0x0A { line += 1; column = 1 } else if byte & 0xC0 != 0x80 { column += 1 }
        }
        return JSONParseError(message: message, offset: index, line: line, column: column)
    }

    @inline(__always)
    mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    mutating func parseValue() throws(JSONParseError) -> JSONValue {
        guard index < bytes.count else { throw fail("unexpected end of input") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try parseObject()
        case UInt8(ascii: "["): return try parseArray()
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): return try literal("true", .bool(true))
        case UInt8(ascii: "f"): return try literal("false", .bool(false))
        case UInt8(ascii: "n"): return try literal("null", .null)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try parseNumber())
        default: throw fail("unexpected character '\(Character(Unicode.Scalar(bytes[index])))'")
        }
    }

    mutating func literal(_ word: StaticString, _ value: JSONValue) throws(JSONParseError) -> JSONValue {
        let count = word.utf8CodeUnitCount
        guard index + count <= bytes.count else { throw fail("expected \(word)") }
        let matches = word.withUTF8Buffer { expected in
            (0..<count).allSatisfy { bytes[index + $0] == expected[$0] }
        }
        guard matches else { throw fail("expected \(word)") }
        index += count
        return value
    }

    mutating func nest() throws(JSONParseError) {
        depth += 1
        if depth > 512 { throw fail("nested more than 512 levels deep") }
    }

    mutating func parseObject() throws(JSONParseError) -> JSONValue {
        try nest()
        index += 1
        var fields: [String: JSONValue] = [:]
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
            index += 1
            depth -= 1
            return .object(fields)
        }
        while true {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw fail("expected a quoted key") }
            let key = try parseString()
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw fail("expected ':' after a key") }
            index += 1
            skipWhitespace()
            fields[key] = try parseValue()
            skipWhitespace()
            guard index < bytes.count else { throw fail("unexpected end of input in an object") }
            if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
            if bytes[index] == UInt8(ascii: "}") { index += 1; break }
            throw fail("expected ',' or '}' in an object")
        }
        depth -= 1
        return .object(fields)
    }

    mutating func parseArray() throws(JSONParseError) -> JSONValue {
        try nest()
        index += 1
        var items: [JSONValue] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
            index += 1
            depth -= 1
            return .array(items)
        }
        while true {
            skipWhitespace()
            items.append(try parseValue())
            skipWhitespace()
            guard index < bytes.count else { throw fail("unexpected end of input in a list") }
            if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
            if bytes[index] == UInt8(ascii: "]") { index += 1; break }
            throw fail("expected ',' or ']' in a list")
        }
        depth -= 1
        return .array(items)
    }

    mutating func parseString() throws(JSONParseError) -> String {
        index += 1
        // The common case: no escapes, one String made from the bytes in place.
        var scan = index
        while scan < bytes.count {
            let byte = bytes[scan]
            if byte == UInt8(ascii: "\"") {
                let text = String(decoding: bytes[index..<scan], as: UTF8.self)
                index = scan + 1
                return text
            }
            if byte == UInt8(ascii: "\\") || byte < 0x20 { break }
            scan += 1
        }
        // With escapes: the decoded bytes gathered in a buffer and made a String once, of
        // its exact length (a String grown by appending keeps up to twice its length as
        // capacity, and a chat message's content, an escaped JSON envelope, is kept by the
        // server for the whole run).
        var out: [UInt8] = []
        out.reserveCapacity(scan - index + 64)
        var start = index
        while true {
            guard index < bytes.count else { throw fail("unterminated string") }
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                out += bytes[start..<index]
                index += 1
                break
            }
            if byte < 0x20 { throw fail("control character in a string") }
            if byte == UInt8(ascii: "\\") {
                out += bytes[start..<index]
                index += 1
                guard index < bytes.count else { throw fail("unterminated escape") }
                let escape = bytes[index]
                index += 1
                switch escape {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(escape)
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0C)
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "r"): out.append(0x0D)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "u"):
                    var code = try hex4()
                    if (0xD800...0xDBFF).contains(code) {
                        guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                            throw fail("unpaired surrogate in a string")
                        }
                        index += 2
                        let low = try hex4()
                        guard (0xDC00...0xDFFF).contains(low) else { throw fail("unpaired surrogate in a string") }
                        code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                    } else if (0xDC00...0xDFFF).contains(code) {
                        throw fail("unpaired surrogate in a string")
                    }
                    Unicode.UTF8.encode(Unicode.Scalar(code)!) { out.append($0) }
                default: throw fail("unknown escape \\\(Character(Unicode.Scalar(escape)))")
                }
                start = index
                continue
            }
            index += 1
        }
        return String(decoding: out, as: UTF8.self)
    }

    mutating func hex4() throws(JSONParseError) -> UInt32 {
        guard index + 4 <= bytes.count else { throw fail("truncated \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let b = bytes[index]
            let digit: UInt32
            switch b {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(b - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(b - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(b - UInt8(ascii: "A") + 10)
            default: throw fail("bad hex digit in a \\u escape")
            }
            value = value * 16 + digit
            index += 1
        }
        return value
    }

    mutating func parseNumber() throws(JSONParseError) -> Double {
        let start = index
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard index < bytes.count, isDigit(bytes[index]) else { throw fail("expected a digit") }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
        } else {
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            guard index < bytes.count, isDigit(bytes[index]) else { throw fail("expected a digit after '.'") }
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard index < bytes.count, isDigit(bytes[index]) else { throw fail("expected a digit in an exponent") }
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        // Integers that fit a Double exactly need no text round trip.
        let digits = index - start - (bytes[start] == UInt8(ascii: "-") ? 1 : 0)
        if digits <= 15, !bytes[start..<index].contains(where: { $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "e") || $0 == UInt8(ascii: "E") }) {
            var value: Int64 = 0
            for byte in bytes[start..<index] where byte != UInt8(ascii: "-") { value = value * 10 + Int64(byte - UInt8(ascii: "0")) }
            return Double(bytes[start] == UInt8(ascii: "-") ? -value : value)
        }
        let text = String(decoding: bytes[start..<index], as: UTF8.self)
        guard let value = Double(text), value.isFinite else { throw fail("number out of range") }
        return value
    }

    func isDigit(_ b: UInt8) -> Bool { b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9") }
}
