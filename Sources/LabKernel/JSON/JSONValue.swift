/// A JSON document as a value: workflow context data, command payloads, parameters.
///
/// Objects keep their keys sorted when written (`canonicalText`), so equal values always
/// serialise to equal bytes: what digests, signatures and golden tests need.
public enum JSONValue: Hashable, Sendable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    public subscript(key: String) -> JSONValue? {
        if case .object(let fields) = self { return fields[key] }
        return nil
    }

    public var stringValue: String? { if case .string(let s) = self { return s }; return nil }
    public var numberValue: Double? { if case .number(let n) = self { return n }; return nil }
    public var boolValue: Bool? { if case .bool(let b) = self { return b }; return nil }
    public var arrayValue: [JSONValue]? { if case .array(let a) = self { return a }; return nil }
    public var objectValue: [String: JSONValue]? { if case .object(let o) = self { return o }; return nil }

    /// Compact JSON with object keys in sorted order.
    public var canonicalText: String {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        write(to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Writes compact, key-sorted JSON as UTF-8 (one buffer, one String at the end: the
    /// device store writes a snapshot per changed instance per tick).
    public func write(to out: inout [UInt8]) { write(to: &out, sortedKeys: true) }

    /// Writes compact JSON; with `sortedKeys: false` object keys come in the dictionary's
    /// own order, which differs between processes: for stored forms that are parsed back,
    /// never compared (sorting is most of the cost of writing a small object).
    public func write(to out: inout [UInt8], sortedKeys: Bool) {
        switch self {
        case .null: out.append(contentsOf: [0x6E, 0x75, 0x6C, 0x6C])
        case .bool(let b): out.append(contentsOf: b ? [0x74, 0x72, 0x75, 0x65] : [0x66, 0x61, 0x6C, 0x73, 0x65])
        case .number(let n): out.append(contentsOf: Self.format(n).utf8)
        case .string(let s): Self.writeString(s, to: &out)
        case .array(let items):
            out.append(0x5B)
            for (i, item) in items.enumerated() {
                if i > 0 { out.append(0x2C) }
                item.write(to: &out, sortedKeys: sortedKeys)
            }
            out.append(0x5D)
        case .object(let fields):
            out.append(0x7B)
            var first = true
            func member(_ key: String, _ value: JSONValue) {
                if !first { out.append(0x2C) }
                first = false
                Self.writeString(key, to: &out)
                out.append(0x3A)
                value.write(to: &out, sortedKeys: sortedKeys)
            }
            if sortedKeys {
                for (key, value) in fields.sorted(by: { $0.key < $1.key }) { member(key, value) }
            } else {
                for (key, value) in fields { member(key, value) }
            }
            out.append(0x7D)
        }
    }

    func write(to out: inout String) {
        var bytes: [UInt8] = []
        write(to: &bytes)
        out += String(decoding: bytes, as: UTF8.self)
    }

    /// Integers without a fraction, other numbers in Swift's shortest round-trip form.
    static func format(_ n: Double) -> String {
        guard n.isFinite else { return "null" }
        if n == n.rounded(), abs(n) < 9.007_199_254_740_992e15 { return String(Int64(n)) }
        return "\(n)"
    }

    public static func writeString(_ s: String, to out: inout [UInt8]) {
        out.append(0x22)
        var text = s
        text.withUTF8 { bytes in
            // Most strings need no escape: copy them whole.
            var clean = true
            for byte in bytes where byte < 0x20 || byte == 0x22 || byte == 0x5C {
                clean = false
                break
            }
            if clean {
                out.append(contentsOf: bytes)
                return
            }
            for byte in bytes {
                switch byte {
                case 0x22: out.append(contentsOf: [0x5C, 0x22])
                case 0x5C: out.append(contentsOf: [0x5C, 0x5C])
                case 0x0A: out.append(contentsOf: [0x5C, 0x6E])
                case 0x0D: out.append(contentsOf: [0x5C, 0x72])
                case 0x09: out.append(contentsOf: [0x5C, 0x74])
                case 0x00..<0x20:
                    out.append(contentsOf: [0x5C, 0x75, 0x30, 0x30, lowercaseHexDigits[Int(byte >> 4)], lowercaseHexDigits[Int(byte & 0xF)]])
                default: out.append(byte)
                }
            }
        }
        out.append(0x22)
    }

    static func writeString(_ s: String, to out: inout String) {
        var bytes: [UInt8] = []
        writeString(s, to: &bytes)
        out += String(decoding: bytes, as: UTF8.self)
    }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral,
    ExpressibleByBooleanLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByNilLiteral {
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int) { self = .number(Double(value)) }
    public init(floatLiteral value: Double) { self = .number(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
    public init(nilLiteral: ()) { self = .null }
}

extension JSONValue: Codable {
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() { self = .null }
        else if let b = try? container.decode(Bool.self) { self = .bool(b) }
        else if let n = try? container.decode(Double.self) { self = .number(n) }
        else if let s = try? container.decode(String.self) { self = .string(s) }
        else if let a = try? container.decode([JSONValue].self) { self = .array(a) }
        else { self = .object(try container.decode([String: JSONValue].self)) }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let b): try container.encode(b)
        case .number(let n): try container.encode(n)
        case .string(let s): try container.encode(s)
        case .array(let a): try container.encode(a)
        case .object(let o): try container.encode(o)
        }
    }
}

extension JSONValue {
    /// Indented JSON with sorted keys, for people (CLI output, golden files).
    public var prettyText: String {
        var out = ""
        writePretty(to: &out, indent: 0)
        return out
    }

    func writePretty(to out: inout String, indent: Int) {
        let pad = String(repeating: "  ", count: indent + 1)
        let close = String(repeating: "  ", count: indent)
        switch self {
        case .array(let items) where !items.isEmpty:
            out += "[\n"
            for (i, item) in items.enumerated() {
                out += pad
                item.writePretty(to: &out, indent: indent + 1)
                out += i < items.count - 1 ? ",\n" : "\n"
            }
            out += close + "]"
        case .object(let fields) where !fields.isEmpty:
            out += "{\n"
            let keys = fields.keys.sorted()
            for (i, key) in keys.enumerated() {
                out += pad
                Self.writeString(key, to: &out)
                out += ": "
                fields[key]!.writePretty(to: &out, indent: indent + 1)
                out += i < keys.count - 1 ? ",\n" : "\n"
            }
            out += close + "}"
        case .null, .bool, .number, .string, .array, .object:
            write(to: &out)
        }
    }
}
