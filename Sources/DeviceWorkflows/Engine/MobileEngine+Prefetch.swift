import CPrefetch

/// Cache hints for the tick's pass over instances.
///
/// A busy tick visits every instance in order: it walks the tree, and the snapshot it
/// takes retains the boxes the instance holds (details, the context's base and newest
/// change) and fills a spare snapshot (that object, and the tree buffer it kept). All of
/// them were last touched a tick or two earlier, ten thousand instances back, so they
/// are in memory, not in cache, and the tick waits for each line in turn: the next
/// address is known only once the previous load arrives. Hinting the lines of the
/// instance and of the spare a few places ahead lets those loads overlap the work on
/// this one. The hints change nothing the engine computes; a stale address costs an
/// instruction.
///
/// Addresses are read as raw words at the fields' offsets, never through references:
/// reading a reference retains it, which writes the very line the hint is meant to
/// fetch early.
///
/// Measured (docs/benchmarks.md, stop 14): hinting the instance four ahead, 1.12x by
/// the median of ten interleaved runs; the spare as well, 1.14-1.17x more. (The spare's
/// hint first measured slower than none: written as an engine method reading
/// `spareSnapshots` through `self`, it copied the whole engine per call.)
extension MobileEngine {
    /// How many instances ahead of the walk the hints run. A walk and a persist take
    /// about two microseconds, twenty times a load from memory; much further ahead, the
    /// lines of several instances compete for the first-level cache.
    static var hintDistance: Int { 4 }

    /// Hints the tree and boxes of the instance numbered `number`, for a driver handing
    /// the engine a batch of results or answers in instance order (`EngineHost.tick`).
    /// Mutating only so that the engine is passed by reference: a read-only method took
    /// a copy of the whole engine struct on every call.
    mutating func hintInstance(number: UInt64) {
        if let index = indexByNumber[number] { instances.hint(at: index, lines: programOf[index].treeLines) }
    }

    /// Hints the tree and boxes of the instance at `index` (mutating for the same reason).
    mutating func hintInstance(at index: Int) { instances.hint(at: index, lines: programOf[index].treeLines) }
}

extension [WorkflowInstance] {
    /// Hints the instance at `index` itself, its details box, context base and newest
    /// change, and `lines` of its tree buffer.
    func hint(at index: Int, lines: Int) {
        withUnsafeBufferPointer { buffer in
            let instance = UnsafeRawPointer(buffer.baseAddress! + index)
            // Reading the references below brings the instance's first line; its state
            // and id are on the second.
            fleetlab_prefetch(instance + 64)
            fleetlab_prefetch(instance.load(fromByteOffset: HintLayout.details, as: UnsafeRawPointer?.self))
            fleetlab_prefetch(instance.load(fromByteOffset: HintLayout.contextBase, as: UnsafeRawPointer?.self))
            fleetlab_prefetch(instance.load(fromByteOffset: HintLayout.contextRecent, as: UnsafeRawPointer?.self))
            guard let tree = instance.load(fromByteOffset: HintLayout.nodes, as: UnsafeRawPointer?.self) else { return }
            for line in 0..<lines { fleetlab_prefetch(tree + 64 * line) }
        }
    }
}

/// Where the references the hints follow sit: in a `WorkflowInstance`, and in an
/// `InstanceSnapshot` object.
enum HintLayout {
    // Computed, not stored: the optimizer folds each to a constant, where a static `let`
    // is a call to `swift_once` on every read.

    /// The tree's buffer.
    static var nodes: Int { MemoryLayout<WorkflowInstance>.offset(of: \.nodes)! }

    /// The boxes a snapshot retains: details, and the context's base and newest change.
    static var details: Int { MemoryLayout<WorkflowInstance>.offset(of: \.details)! }
    static var contextBase: Int { MemoryLayout<WorkflowInstance>.offset(of: \.data)! + ContextData.baseOffset }
    static var contextRecent: Int { MemoryLayout<WorkflowInstance>.offset(of: \.data)! + ContextData.recentOffset }

    /// A Swift object's header (its type and reference count), before its first field.
    static var objectHeader: Int { 2 * MemoryLayout<UInt>.size }

    /// A snapshot object's tree buffer: its instance's (the object's first field).
    static var snapshotTree: Int { objectHeader + nodes }

    /// The lines of a snapshot object: its header and instance.
    static var snapshotLines: Int { (objectHeader + MemoryLayout<WorkflowInstance>.size + 63) / 64 }
}

extension SpareSnapshots {
    /// Hints the spare the persist `distance` places ahead will take (spares are taken
    /// in order from `next`): the object `2 * distance` ahead, and `distance` ahead, once
    /// that object's lines (holding the addresses) have arrived, the newest change of its
    /// context and `lines` of the tree buffer the persist will copy into.
    func hint(distance: Int, lines: Int) {
        snapshots.withUnsafeBufferPointer { buffer in
            let far = next + 2 * distance
            if far < buffer.count, let object = UnsafeRawPointer(buffer.baseAddress! + far).load(as: UnsafeRawPointer?.self) {
                for line in 0..<HintLayout.snapshotLines { fleetlab_prefetch(object + 64 * line) }
            }
            let near = next + distance
            if near < buffer.count, let object = UnsafeRawPointer(buffer.baseAddress! + near).load(as: UnsafeRawPointer?.self) {
                // Refilling the spare releases the change its context last pointed at.
                fleetlab_prefetch(object.load(fromByteOffset: HintLayout.objectHeader + HintLayout.contextRecent, as: UnsafeRawPointer?.self))
                guard let tree = object.load(fromByteOffset: HintLayout.snapshotTree, as: UnsafeRawPointer?.self) else { return }
                for line in 0..<lines { fleetlab_prefetch(tree + 64 * line) }
            }
        }
    }
}
