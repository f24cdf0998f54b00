import CPrefetch

/// Cache hints for the tick's pass over instances.
///
/// A busy tick visits every instance in order: it walks the tree, and the snapshot it
/// takes retains the boxes the instance holds (details, the context's base and newest
/// change). All of them were last touched a tick earlier, ten thousand instances back,
/// so they are in memory, not in cache, and the walk waits for each line in turn: the
/// next address is known only once the previous load arrives. Hinting the lines of the
/// instance a few places ahead lets those loads overlap the work on this one. The hints
/// change nothing the engine computes; a stale address costs an instruction.
///
/// Addresses are read as raw words at the fields' offsets, never through references:
/// reading a reference retains it, which writes the very line the hint is meant to
/// fetch early.
///
/// Measured (docs/benchmarks.md, stop 14): hinting the instance four ahead, about 1.1x.
/// Hinting also the spare snapshot each persist fills (the object, then its tree buffer)
/// made the tick slower than no hints at all, and was left out.
extension MobileEngine {
    /// How many instances ahead of the walk the hints run. A walk and a persist take
    /// about two microseconds, twenty times a load from memory; much further ahead, the
    /// lines of several instances compete for the first-level cache.
    static let hintDistance = 4

    /// Hints the tree and boxes of the instance at `index`.
    func hintInstance(at index: Int) {
        let lines = programOf[index].treeLines
        instances.withUnsafeBufferPointer { buffer in
            let instance = UnsafeRawPointer(buffer.baseAddress! + index)
            for offset in HintLayout.boxes { fleetlab_prefetch(instance.load(fromByteOffset: offset, as: UnsafeRawPointer?.self)) }
            guard let tree = instance.load(fromByteOffset: HintLayout.nodes, as: UnsafeRawPointer?.self) else { return }
            for line in 0..<lines { fleetlab_prefetch(tree + 64 * line) }
        }
    }
}

/// Where the references the hints follow sit in a `WorkflowInstance`.
enum HintLayout {
    /// The tree's buffer.
    static let nodes = MemoryLayout<WorkflowInstance>.offset(of: \.nodes)!

    /// The boxes a snapshot retains: details, and the context's base and newest change.
    static let boxes: [Int] = {
        let data = MemoryLayout<WorkflowInstance>.offset(of: \.data)!
        return [MemoryLayout<WorkflowInstance>.offset(of: \.details)!] + ContextData.referenceOffsets.map { data + $0 }
    }()
}

