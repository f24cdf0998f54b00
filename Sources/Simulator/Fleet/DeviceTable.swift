/// A value for each of some of the fleet's devices, by device index: what a stack keeps
/// per phone (its client) where a dictionary keyed by the index would cost a hash table.
///
/// A dictionary of a value as large as a chat client (about 700 bytes inline) keeps up
/// to twice its count in slots, each as large as the value: 1.4 MB at 1,000 phones. Here
/// each member device has one entry, and each device of the fleet four bytes naming it.
/// Only the members given at the start have a slot; a value is set and taken as in a
/// dictionary (`nil` is no value).
struct DeviceTable<Value> {
    /// Each device's slot in `entries`, or -1 for a device that is not a member.
    private var slots: [Int32]
    private var entries: [Value?]

    /// A table for `members` (device indices, each below `fleetSize`), all without a value.
    init(members: [Int], fleetSize: Int) {
        slots = Array(repeating: -1, count: fleetSize)
        for (slot, device) in members.enumerated() { slots[device] = Int32(slot) }
        entries = Array(repeating: nil, count: members.count)
    }

    /// The device's value. Setting one for a device that is not a member is a programming
    /// error (the stack decided its members at the start).
    subscript(device: Int) -> Value? {
        get {
            guard device >= 0, device < slots.count, slots[device] >= 0 else { return nil }
            return entries[Int(slots[device])]
        }
        set {
            precondition(device >= 0 && device < slots.count && slots[device] >= 0, "device \(device) has no slot in this table")
            entries[Int(slots[device])] = newValue
        }
    }

    /// Takes the device's value out of the table (so that changing it does not copy it).
    mutating func removeValue(forKey device: Int) -> Value? {
        guard device >= 0, device < slots.count, slots[device] >= 0 else { return nil }
        var taken: Value? = nil
        swap(&taken, &entries[Int(slots[device])])
        return taken
    }

    /// The values there are, in the order of the members.
    var values: [Value] { entries.compactMap { $0 } }

    /// The devices that have a value, in ascending order.
    var devices: [Int] {
        slots.indices.filter { slots[$0] >= 0 && entries[Int(slots[$0])] != nil }
    }
}
