/// Reads the fields of a JSON object for a wire decoder, with errors that name the field
/// and say what was expected: `status_updates[3].timestamp must be a string`.
///
/// Unknown fields are ignored (the real servers' serde does the same); missing optional
/// fields and explicit nulls both read as nil.
public struct JSONFields {
    public let object: [String: JSONValue]
    /// Where the object sits in the document, e.g. `status_updates[3]`; empty at the top.
    public let path: String

    public init(_ value: JSONValue, path: String = "") throws(JSONFieldError) {
        guard case .object(let object) = value else {
            throw JSONFieldError(path: path, message: "must be a JSON object, found \(value.kindName)")
        }
        self.object = object
        self.path = path
    }

    public func at(_ key: String) -> String { path.isEmpty ? key : "\(path).\(key)" }

    func present(_ key: String) -> JSONValue? {
        guard let value = object[key], value != .null else { return nil }
        return value
    }

    public func string(_ key: String) throws(JSONFieldError) -> String {
        guard let value = try optionalString(key) else { throw JSONFieldError(path: at(key), message: "is required") }
        return value
    }

    public func optionalString(_ key: String) throws(JSONFieldError) -> String? {
        guard let value = present(key) else { return nil }
        guard case .string(let s) = value else { throw JSONFieldError(path: at(key), message: "must be a string, found \(value.kindName)") }
        return s
    }

    /// A non-empty string.
    public func name(_ key: String) throws(JSONFieldError) -> String {
        let value = try string(key)
        guard !value.isEmpty else { throw JSONFieldError(path: at(key), message: "must not be empty") }
        return value
    }

    public func optionalInt(_ key: String) throws(JSONFieldError) -> Int? {
        guard let value = present(key) else { return nil }
        guard case .number(let n) = value, n.rounded() == n, abs(n) < 9e15 else {
            throw JSONFieldError(path: at(key), message: "must be an integer, found \(value.numberValue != nil ? "a fraction" : value.kindName)")
        }
        return Int(n)
    }

    public func optionalBool(_ key: String) throws(JSONFieldError) -> Bool? {
        guard let value = present(key) else { return nil }
        guard case .bool(let b) = value else { throw JSONFieldError(path: at(key), message: "must be true or false, found \(value.kindName)") }
        return b
    }

    public func optionalObject(_ key: String) throws(JSONFieldError) -> [String: JSONValue]? {
        guard let value = present(key) else { return nil }
        guard case .object(let o) = value else { throw JSONFieldError(path: at(key), message: "must be an object, found \(value.kindName)") }
        return o
    }

    /// Any JSON value, nil when absent or null.
    public func optionalValue(_ key: String) -> JSONValue? { present(key) }

    /// An array (empty when absent), at most `limit` long, each element read by `element`.
    public func array<T>(_ key: String, limit: Int = .max,
                         _ element: (JSONValue, String) throws(JSONFieldError) -> T) throws(JSONFieldError) -> [T] {
        guard let value = present(key) else { return [] }
        guard case .array(let items) = value else { throw JSONFieldError(path: at(key), message: "must be an array, found \(value.kindName)") }
        guard items.count <= limit else {
            throw JSONFieldError(path: at(key), message: "must contain at most \(limit) items, found \(items.count)", tooLarge: true)
        }
        var out: [T] = []
        out.reserveCapacity(items.count)
        for (index, item) in items.enumerated() { out.append(try element(item, "\(at(key))[\(index)]")) }
        return out
    }
}

/// A field of a wire object that is missing or of the wrong type.
public struct JSONFieldError: Error, Equatable, Sendable, CustomStringConvertible {
    public var path: String
    public var message: String
    /// The value was too big rather than wrong (some APIs answer 413 for that).
    public var tooLarge = false

    public init(path: String, message: String, tooLarge: Bool = false) {
        self.path = path
        self.message = message
        self.tooLarge = tooLarge
    }

    public var description: String { path.isEmpty ? "the body \(message)" : "\(path) \(message)" }
}

extension JSONValue {
    /// "a string", "an array", … for error messages.
    public var kindName: String {
        switch self {
        case .null: return "null"
        case .bool: return "a boolean"
        case .number: return "a number"
        case .string: return "a string"
        case .array: return "an array"
        case .object: return "an object"
        }
    }
}
