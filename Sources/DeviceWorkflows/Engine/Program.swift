import LabKernel

/// A loaded sequence in the form the interpreter walks: blocks flattened in document
/// order (pre-order, so a block's index is stable for its version), each block's child
/// lists as index lists.
struct Program: Sendable {
    let sequence: SequenceDefinition
    /// The JSON the sequence was loaded from (what the store keeps).
    let json: String
    let blocks: [Block]
    /// `lists[b]` are block `b`'s child lists, as indices into `blocks`.
    let lists: [[[Int32]]]
    let root: [Int32]
    let indexByID: [String: Int32]

    init(sequence: SequenceDefinition, json: String) {
        self.sequence = sequence
        self.json = json
        var blocks: [Block] = []
        var lists: [[[Int32]]] = []
        func flatten(_ list: [Block]) -> [Int32] {
            var indices: [Int32] = []
            for block in list {
                let index = Int32(blocks.count)
                blocks.append(block)
                lists.append([])
                indices.append(index)
                let children = block.childLists.map { flatten($0) }
                lists[Int(index)] = children
            }
            return indices
        }
        self.root = flatten(sequence.blocks)
        self.blocks = blocks
        self.lists = lists
        var byID: [String: Int32] = [:]
        for (index, block) in blocks.enumerated() { byID[block.id] = Int32(index) }
        self.indexByID = byID
    }

    func list(_ kind: NodeKind) -> [Int32] {
        guard case .list(let owner, let list) = kind else { return [] }
        return owner < 0 ? root : lists[Int(owner)][Int(list)]
    }

    var key: ProgramKey { ProgramKey(name: sequence.name, version: sequence.version) }
}

struct ProgramKey: Hashable, Sendable, Comparable {
    var name: String
    var version: Int
    static func < (a: ProgramKey, b: ProgramKey) -> Bool { (a.name, a.version) < (b.name, b.version) }
}

/// Summary of a loaded sequence, as `loadedSequences()` returns it.
public struct SequenceInfo: Sendable, Equatable {
    public var name: String
    public var version: Int
    public var handlers: [String]
}
