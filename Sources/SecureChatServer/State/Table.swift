/// A dictionary of rows that remembers which keys changed since the last
/// `takeDirty()`, so the live driver writes exactly the rows a request touched.
public struct Table<Value: Sendable>: Sendable, Sequence {
    public private(set) var rows: [String: Value] = [:]
    var dirty: Set<String> = []

    public init() {}

    public subscript(key: String) -> Value? {
        get { rows[key] }
        set {
            rows[key] = newValue
            dirty.insert(key)
        }
    }

    public subscript(key: String, default value: @autoclosure () -> Value) -> Value {
        get { rows[key] ?? value() }
        _modify {
            dirty.insert(key)
            yield &rows[key, default: value()]
        }
    }

    public var values: Dictionary<String, Value>.Values { rows.values }
    public var keys: Dictionary<String, Value>.Keys { rows.keys }
    public var count: Int { rows.count }
    public var isEmpty: Bool { rows.isEmpty }
    public func makeIterator() -> Dictionary<String, Value>.Iterator { rows.makeIterator() }

    public mutating func removeAll(where remove: (Value) -> Bool) {
        // The keys first: removing rows while going through them would copy the table.
        for key in rows.compactMap({ remove($0.value) ? $0.key : nil }) {
            rows[key] = nil
            dirty.insert(key)
        }
    }

    /// Drops a row from memory without marking it changed (it lives on elsewhere: a
    /// message set aside into an archive).
    package mutating func forget(_ key: String) { rows[key] = nil }

    /// Loads rows without marking them changed.
    package mutating func load(_ key: String, _ value: Value) { rows[key] = value }

    /// The keys changed since the last call, with their rows (nil: deleted).
    package mutating func takeDirty() -> [(String, Value?)] {
        defer { dirty.removeAll() }
        return dirty.sorted().map { ($0, rows[$0]) }
    }
}
