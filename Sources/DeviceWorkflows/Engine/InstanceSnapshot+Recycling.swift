import Orch8Wire
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
/// Spares are taken in the order the store offered them, which is the order the engine
/// persisted them, so a busy instance mostly gets its own snapshot from two ticks back:
/// refilling it releases references to that instance's details and context, which its
/// walk has just read, rather than another instance's, long gone cold. Taken last-offered
/// first, they went to the instances in reverse; in order measured 1.10x faster by the
/// median of 24 alternating pairs.
///
/// Stores offer spares only from transactions, and keep only those of the latest one: a
/// driver that never collects them holds at most one batch's worth, freed at the next
/// commit. (The simulator's devices apply effects outside transactions, so their stores
/// free old snapshots at once, as before.)
public struct SpareSnapshots: Sendable {
    /// In the order offered; taken from `next` on, each taken slot left nil. (Taking
    /// from the front, rather than reversing the array and popping from the back, leaves
    /// the objects untouched until taken: the reversal retained and released every one,
    /// a cache miss each, a tick after they were last used.)
    var snapshots: [InstanceSnapshot?] = []
    var next = 0

    public init() {}

    /// Spares not yet taken.
    public var count: Int { snapshots.count - next }

    /// Keeps `snapshot` (whether anything else still holds it is checked when it is taken).
    public mutating func offer(_ snapshot: consuming InstanceSnapshot) { snapshots.append(snapshot) }

    /// Starts a new commit's collection (the previous one's spares are freed if nobody
    /// took them).
    public mutating func reset() {
        snapshots.removeAll(keepingCapacity: true)
        next = 0
    }

    /// Moves every spare into `other`, to be taken in the order they were offered, before
    /// any `other` still had.
    public mutating func move(into other: inout SpareSnapshots) {
        if other.count > 0 { snapshots.append(contentsOf: other.snapshots[other.next...]) }
        other.reset()
        swap(&snapshots, &other.snapshots)
        swap(&next, &other.next)
    }

    /// A spare nothing else holds, retired (its tree buffer taken aside); spares still
    /// held elsewhere are dropped.
    mutating func pop() -> InstanceSnapshot? {
        while next < snapshots.count {
            var taken: InstanceSnapshot?
            swap(&taken, &snapshots[next])
            next += 1
            guard var spare = taken.take(), isKnownUniquelyReferenced(&spare) else { continue }
            spare.retire()
            return spare
        }
        return nil
    }
}
