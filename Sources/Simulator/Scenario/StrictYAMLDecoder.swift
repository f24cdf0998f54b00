import Yams

/// A `Decoder` over a YAML tree that refuses what it does not understand.
///
/// Foundation's decoders skip unknown keys, which turns a typo ("sesionsPerDay") into a
/// silently ignored setting. This one rejects any mapping key its `CodingKeys` do not
/// know, names the allowed keys when they are `CaseIterable`, and reports every problem
/// with the key path and the line and column in the file.
struct StrictYAMLDecoder {
    /// A problem found while decoding, with where it is.
    struct Problem: Error {
        var path: [any CodingKey]
        var mark: Mark?
        var message: String
    }

    static func decode<T: Decodable>(_ type: T.Type, from node: Node) throws -> T {
        try T(from: NodeDecoder(node: node, codingPath: []))
    }
}

/// Renders a coding path as `devices[0].power.drainPerHour`.
func renderPath(_ path: [any CodingKey]) -> String {
    var text = ""
    for key in path {
        if let index = key.intValue {
            text += "[\(index)]"
        } else {
            text += text.isEmpty ? key.stringValue : "." + key.stringValue
        }
    }
    return text.isEmpty ? "(top level)" : text
}

struct IndexKey: CodingKey {
    var stringValue: String { "\(intValue ?? 0)" }
    var intValue: Int?
    init(_ index: Int) { intValue = index }
    init?(stringValue: String) { return nil }
    init?(intValue: Int) { self.intValue = intValue }
}

struct NodeDecoder: Decoder {
    let node: Node
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func problem(_ message: String) -> StrictYAMLDecoder.Problem {
        StrictYAMLDecoder.Problem(path: codingPath, mark: node.mark, message: message)
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        guard case .mapping(let mapping) = node else {
            throw problem("expected a mapping of keys, found \(node.kindDescription)")
        }
        var entries: [(key: String, node: Node, keyNode: Node)] = []
        for (keyNode, value) in mapping {
            guard case .scalar(let scalar) = keyNode else {
                throw StrictYAMLDecoder.Problem(path: codingPath, mark: keyNode.mark, message: "keys must be plain names")
            }
            guard Key(stringValue: scalar.string) != nil else {
                var message = "unknown key '\(scalar.string)'"
                if let all = Key.self as? any (CaseIterable & CodingKey).Type {
                    message += "; expected one of: " + allKeyNames(all).joined(separator: ", ")
                }
                throw StrictYAMLDecoder.Problem(path: codingPath, mark: keyNode.mark, message: message)
            }
            entries.append((scalar.string, value, keyNode))
        }
        return KeyedDecodingContainer(KeyedNodeContainer<Key>(entries: entries, decoder: self))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        guard case .sequence(let sequence) = node else {
            throw problem("expected a list, found \(node.kindDescription)")
        }
        return UnkeyedNodeContainer(items: Array(sequence), decoder: self)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        SingleNodeContainer(decoder: self)
    }

    func child(_ node: Node, key: any CodingKey) -> NodeDecoder {
        NodeDecoder(node: node, codingPath: codingPath + [key])
    }

    /// The scalar text of this node, or a problem naming what was expected.
    func scalar(expecting what: String) throws -> String {
        guard case .scalar(let scalar) = node else { throw problem("expected \(what), found \(node.kindDescription)") }
        return scalar.string
    }
}

private func allKeyNames<K: CaseIterable & CodingKey>(_ type: K.Type) -> [String] {
    K.allCases.map(\.stringValue)
}

extension Node {
    var kindDescription: String {
        switch self {
        case .scalar(let s): return s.string.isEmpty ? "an empty value" : "'\(s.string)'"
        case .mapping: return "a mapping"
        case .sequence: return "a list"
        case .alias: return "an alias"
        }
    }

    var isNull: Bool {
        guard case .scalar(let s) = self else { return false }
        return ["", "~", "null", "Null", "NULL"].contains(s.string) && s.style == .plain
    }
}

struct KeyedNodeContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let entries: [(key: String, node: Node, keyNode: Node)]
    let decoder: NodeDecoder
    var codingPath: [any CodingKey] { decoder.codingPath }
    var allKeys: [Key] { entries.compactMap { Key(stringValue: $0.key) } }

    func contains(_ key: Key) -> Bool { entries.contains { $0.key == key.stringValue } }

    func child(_ key: Key) throws -> NodeDecoder {
        guard let entry = entries.first(where: { $0.key == key.stringValue }) else {
            throw StrictYAMLDecoder.Problem(path: codingPath, mark: decoder.node.mark,
                                            message: "missing required key '\(key.stringValue)'")
        }
        return decoder.child(entry.node, key: key)
    }

    func decodeNil(forKey key: Key) throws -> Bool { try child(key).node.isNull }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        try child(key).decodeValue(T.self)
    }

    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
        guard contains(key) else { return nil }
        let child = try child(key)
        if child.node.isNull { return nil }
        return try child.decodeValue(T.self)
    }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
        try child(key).container(keyedBy: type)
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        try child(key).unkeyedContainer()
    }

    func superDecoder() throws -> any Decoder { decoder }
    func superDecoder(forKey key: Key) throws -> any Decoder { try child(key) }
}

struct UnkeyedNodeContainer: UnkeyedDecodingContainer {
    let items: [Node]
    let decoder: NodeDecoder
    var currentIndex = 0
    var codingPath: [any CodingKey] { decoder.codingPath }
    var count: Int? { items.count }
    var isAtEnd: Bool { currentIndex >= items.count }

    mutating func next() throws -> NodeDecoder {
        guard !isAtEnd else { throw decoder.problem("the list has too few items") }
        defer { currentIndex += 1 }
        return decoder.child(items[currentIndex], key: IndexKey(currentIndex))
    }

    mutating func decodeNil() throws -> Bool {
        guard !isAtEnd, items[currentIndex].isNull else { return false }
        currentIndex += 1
        return true
    }

    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T { try next().decodeValue(T.self) }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
        try next().container(keyedBy: type)
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer { try next().unkeyedContainer() }
    mutating func superDecoder() throws -> any Decoder { try next() }
}

struct SingleNodeContainer: SingleValueDecodingContainer {
    let decoder: NodeDecoder
    var codingPath: [any CodingKey] { decoder.codingPath }

    func decodeNil() -> Bool { decoder.node.isNull }
    func decode<T: Decodable>(_ type: T.Type) throws -> T { try decoder.decodeValue(T.self) }
}

extension NodeDecoder {
    /// Decodes scalars itself (with YAML's spellings and precise messages) and everything
    /// else through the type's own `init(from:)`.
    func decodeValue<T: Decodable>(_ type: T.Type) throws -> T {
        if T.self == String.self { return try scalar(expecting: "a text value") as! T }
        if T.self == Bool.self {
            switch try scalar(expecting: "true or false") {
            case "true", "True", "TRUE", "yes", "Yes", "on": return true as! T
            case "false", "False", "FALSE", "no", "No", "off": return false as! T
            case let other: throw problem("expected true or false, found '\(other)'")
            }
        }
        if T.self == Double.self {
            let text = try scalar(expecting: "a number")
            guard let value = Double(text.replacingUnderscores()), value.isFinite else {
                throw problem("expected a number, found '\(text)'")
            }
            return value as! T
        }
        if let integer = T.self as? any FixedWidthInteger.Type {
            let text = try scalar(expecting: "a whole number")
            guard let value = integer.init(text.replacingUnderscores(), radix: 10) else {
                throw problem("expected a whole number in \(integer.min)...\(integer.max), found '\(text)'")
            }
            return value as! T
        }
        do {
            return try T(from: self)
        } catch let error as DecodingError {
            throw translate(error)
        }
    }

    /// Turns a `DecodingError` thrown by a type's own `init(from:)` into a located problem.
    func translate(_ error: DecodingError) -> StrictYAMLDecoder.Problem {
        switch error {
        case .dataCorrupted(let context), .typeMismatch(_, let context), .valueNotFound(_, let context):
            return StrictYAMLDecoder.Problem(path: context.codingPath, mark: nil, message: context.debugDescription)
        case .keyNotFound(let key, let context):
            return StrictYAMLDecoder.Problem(path: context.codingPath, mark: nil, message: "missing required key '\(key.stringValue)'")
        @unknown default:
            return problem("\(error)")
        }
    }
}

extension String {
    func replacingUnderscores() -> String { String(filter { $0 != "_" }) }
}
