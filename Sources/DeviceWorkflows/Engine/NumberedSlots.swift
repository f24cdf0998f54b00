import Orch8Wire
/// A map from instance numbers to values, kept as an array from the oldest number present.
///
/// Numbers are handed out in order, and the engine and its stores deal with instances in
/// that order, so a lookup is an index, not a hash. Handler results and persists reach
/// every busy instance every tick, in number order: a hash map put each on a random cache
/// line, this reads the next entry. Numbers of removed instances leave holes until the
/// ones before them go too (the front is cut off once the empty part is half the array):
/// a slot for each number handed out since the oldest instance still present.
struct NumberedSlots<Value>: Sendable where Value: Sendable {
    private var first: UInt64 = 0
    /// `slots[i]` holds number `first + i`.
    private var slots: [Value?] = []
    /// Every slot before `head` is empty; they are cut off once they are half the array.
    private var head = 0
    private(set) var count = 0

    init() {}

    subscript(number: UInt64) -> Value? {
        get {
            guard number >= first, number - first < UInt64(slots.count) else { return nil }
            return slots[Int(number - first)]
        }
        set {
            if let newValue { _ = updateValue(newValue, forKey: number) } else { _ = removeValue(forKey: number) }
        }
    }

    /// Sets `number`'s value; returns the one it replaced.
    @discardableResult
    mutating func updateValue(_ value: Value, forKey number: UInt64) -> Value? {
        if count == 0 {
            slots.removeAll(keepingCapacity: true)
            first = number
            head = 0
        } else if number < first {
            // Not a path the engine takes (numbers come in order); kept correct anyway.
            let added = Int(first - number)
            slots.insert(contentsOf: repeatElement(nil, count: added), at: 0)
            first = number
            head += added
        }
        let offset = Int(number - first)
        if offset >= slots.count { slots.append(contentsOf: repeatElement(nil, count: offset - slots.count + 1)) }
        // Swapped in, not read then overwritten: that retained and released the old value.
        var old: Value? = value
        swap(&old, &slots[offset])
        if old == nil { count += 1 }
        if offset < head { head = offset }
        return old
    }

    /// Removes `number`'s value; returns it.
    @discardableResult
    mutating func removeValue(forKey number: UInt64) -> Value? {
        guard number >= first, number - first < UInt64(slots.count) else { return nil }
        let offset = Int(number - first)
        guard slots[offset] != nil else { return nil }
        var old: Value?
        swap(&old, &slots[offset])
        count -= 1
        if offset == head {
            while head < slots.count, slots[head] == nil { head += 1 }
            if head * 2 >= slots.count {
                slots.removeFirst(head)
                first += UInt64(head)
                head = 0
            }
        }
        return old
    }

    /// The values in number order.
    var values: [Value] { slots.compactMap { $0 } }
}

extension NumberedSlots {
    /// The slots for `numbers`, each mapped to its position (the engine's index map).
    init(indexing numbers: [UInt64]) where Value == Int {
        self.init()
        for (index, number) in numbers.enumerated() { updateValue(index, forKey: number) }
    }
}
