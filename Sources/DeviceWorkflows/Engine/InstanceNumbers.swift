/// Where each instance number's instance is in the engine's arrays.
///
/// Numbers are handed out in order, and the engine keeps its instances in that order (a
/// restore appends them sorted, garbage collection keeps the order), so the map is an
/// array of indices from the oldest number still present: a lookup is an index, not a
/// hash. Handler results arrive for every busy instance every tick, in number order; a
/// hash map put each lookup on a random cache line, this one reads the next entry.
///
/// Numbers of deleted instances leave holes until the instances before them go too:
/// four bytes for each number handed out since the oldest instance still present.
struct InstanceNumbers: Sendable, Equatable {
    private var first: UInt64 = 0
    /// `indices[i]` is the index of instance `first + i`, or -1.
    private var indices: [Int32] = []

    subscript(number: UInt64) -> Int? {
        guard number >= first, number - first < UInt64(indices.count) else { return nil }
        let index = indices[Int(number - first)]
        return index < 0 ? nil : Int(index)
    }

    mutating func set(_ number: UInt64, _ index: Int) {
        if indices.isEmpty {
            first = number
        } else if number < first {
            // Not a path the engine takes (numbers come in order); kept correct anyway.
            indices.insert(contentsOf: repeatElement(-1, count: Int(first - number)), at: 0)
            first = number
        }
        let offset = Int(number - first)
        if offset >= indices.count { indices.append(contentsOf: repeatElement(-1, count: offset - indices.count + 1)) }
        indices[offset] = Int32(index)
    }

    /// Rebuilds the map for `numbers`, the instances' numbers in index order.
    init(_ numbers: [UInt64] = []) {
        for (index, number) in numbers.enumerated() { set(number, index) }
    }
}
