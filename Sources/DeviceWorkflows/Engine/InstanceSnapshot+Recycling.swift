/// Snapshots a store no longer needs, kept for the engine's next flushes.
///
/// Every tick the engine snapshots each instance it changed, and the store lets go of
/// that instance's previous snapshot when the tick commits. Freeing the old snapshot and
/// its tree and allocating the new ones is most of what a persist costs in memory (one
/// object and one tree buffer each way, per instance per tick). Instead the store offers
/// the old snapshot here; if nothing else holds it, it is retired (its instance released,
/// its tree buffer kept), and the host hands the spares to the engine, whose next flush
/// fills one with the instance and copies the tree into the kept buffer.
///
/// Stores offer spares only from transactions, and keep only those of the latest one: a
/// driver that never collects them holds at most one batch's worth, freed at the next
/// commit. (The simulator's devices apply effects outside transactions, so their stores
/// free old snapshots at once, as before.)
public struct SpareSnapshots: Sendable {
    var snapshots: [InstanceSnapshot] = []

    public init() {}

    public var count: Int { snapshots.count }

    /// Keeps `snapshot` (whether anything else still holds it is checked when it is taken).
    public mutating func offer(_ snapshot: consuming InstanceSnapshot) { snapshots.append(snapshot) }

    /// Starts a new commit's collection (the previous one's spares are freed if nobody
    /// took them).
    public mutating func reset() { snapshots.removeAll(keepingCapacity: true) }

    /// Moves every spare into `other`.
    public mutating func move(into other: inout SpareSnapshots) {
        if other.snapshots.isEmpty {
            swap(&snapshots, &other.snapshots)
        } else {
            other.snapshots.append(contentsOf: snapshots)
            snapshots.removeAll(keepingCapacity: true)
        }
    }

    /// A spare nothing else holds, retired (its tree buffer taken aside); spares still
    /// held elsewhere are dropped.
    mutating func pop() -> InstanceSnapshot? {
        while var spare = snapshots.popLast() {
            guard isKnownUniquelyReferenced(&spare) else { continue }
            spare.retire()
            return spare
        }
        return nil
    }
}
