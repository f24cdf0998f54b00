public import LabKernel

/// An instance's `context.data`: a map from key to JSON value whose versions share
/// structure, so a snapshot of it costs two references instead of a copy.
///
/// Every tick the engine persists each instance it changed, and the store keeps that
/// version while the engine goes on changing its own. With a plain dictionary the first
/// change after each snapshot copied the whole context (a retain of every key and value)
/// and the next commit freed the old one: the largest single cost of a step. Here a
/// change is one small node on a chain of recent changes in front of a `base`
/// dictionary; versions share the chain's tail and the base. Once the chain is
/// `foldThreshold` long it is folded into a new base, one copy per that many changes.
///
/// Reads look through the chain (newest first, a few string comparisons) and then the
/// base. Everything that needs the whole map (`dictionary`, iteration, equality) sees the
/// merged view.
public struct ContextData: Sendable {
    /// The changes since the base was made, newest first; a nil value removes the key.
    final class Change: Sendable {
        let key: String
        let value: JSONValue?
        let next: Change?
        let depth: Int

        init(key: String, value: JSONValue?, next: Change?) {
            self.key = key
            self.value = value
            self.next = next
            self.depth = (next?.depth ?? 0) + 1
        }
    }

    static let foldThreshold = 16

    private var base: [String: JSONValue]
    private var recent: Change?

    public init(_ dictionary: [String: JSONValue] = [:]) {
        base = dictionary
        recent = nil
    }

    public subscript(key: String) -> JSONValue? {
        get {
            var change = recent
            while let current = change {
                if current.key == key { return current.value }
                change = current.next
            }
            return base[key]
        }
        set {
            recent = Change(key: key, value: newValue, next: recent)
            if recent!.depth > Self.foldThreshold { fold() }
        }
    }

    /// The whole map, changes applied.
    public var dictionary: [String: JSONValue] {
        guard recent != nil else { return base }
        var merged = base
        apply(to: &merged)
        return merged
    }

    public var isEmpty: Bool { dictionary.isEmpty }
    public var count: Int { dictionary.count }

    /// The map as a JSON object.
    public var json: JSONValue { .object(dictionary) }

    /// Makes the chain part of a new base (a copy of the old one, which other versions
    /// may still share).
    mutating func fold() {
        base = dictionary
        recent = nil
    }

    /// The changes since the base, newest first.
    private var chain: [Change] {
        var changes: [Change] = []
        changes.reserveCapacity(recent?.depth ?? 0)
        var change = recent
        while let current = change {
            changes.append(current)
            change = current.next
        }
        return changes
    }

    /// Applies the chain to `map`, oldest change first, growing it once beforehand.
    private func apply(to map: inout [String: JSONValue]) {
        map.reserveCapacity(map.count + (recent?.depth ?? 0))
        for current in chain.reversed() { map[current.key] = current.value }
    }

    /// Writes the map's members, keys unsorted, without building the merged dictionary
    /// first (a device store writes one per changed instance per tick).
    public func writeMembers(into writer: inout JSONObjectWriter) {
        let chain = self.chain
        // Newest first: a key's latest change is the one that counts.
        for (position, current) in chain.enumerated() where !chain[..<position].contains(where: { $0.key == current.key }) {
            if let value = current.value { writer.member(escaping: current.key, value) }
        }
        for (key, value) in base where !chain.contains(where: { $0.key == key }) { writer.member(escaping: key, value) }
    }
}

extension ContextData: Equatable {
    public static func == (a: ContextData, b: ContextData) -> Bool { a.dictionary == b.dictionary }
}

extension ContextData: ExpressibleByDictionaryLiteral {
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self.init(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
}

extension ContextData: Sequence {
    public func makeIterator() -> Dictionary<String, JSONValue>.Iterator { dictionary.makeIterator() }
}
