import LabKernel
import Orch8Wire

/// What kind of block a compiled block is, with the little the interpreter needs on its
/// hot path (no payload to copy).
enum CompiledKind: Sendable, Equatable {
    case step, router, parallel, loop, forEach, tryCatch, subSequence, abSplit, cancellationScope
    case race(firstToSucceed: Bool)
}

/// A step's settings, shared by reference: reading them on every dispatch costs a retain,
/// not a copy of its strings and params.
final class StepSpec: Sendable {
    let sequenceName: String
    let id: String
    let handler: String
    let params: [String: JSONValue]
    let retry: RetryPolicy?
    let timeout: TimeSpan?
    let cancellable: Bool
    let wait: WaitForInput?
    let when: Expression?
    /// The values a waiting step accepts (its choices, or yes/no).
    let choiceValues: [String]
    /// The telemetry detail of each choice given ("input <value>"), made once here rather
    /// than concatenated on every answer.
    let choiceDetails: [String]
    /// What the hot paths need of `wait`, read without copying it (its prompt and
    /// choices are references): whether the step waits, for how long, and the key its
    /// answer is stored under.
    let waits: Bool
    let waitTimeout: TimeSpan?
    let answerKey: String

    init(_ step: StepBlock, sequenceName: String) {
        self.sequenceName = sequenceName
        id = step.id
        handler = step.handler
        params = step.params
        retry = step.retry
        timeout = step.timeout
        cancellable = step.cancellable
        wait = step.waitForInput
        when = step.when
        choiceValues = step.waitForInput?.effectiveChoices.map(\.value) ?? []
        choiceDetails = choiceValues.map { "input " + $0 }
        waits = step.waitForInput != nil
        waitTimeout = step.waitForInput?.timeout
        answerKey = step.waitForInput?.storeAs ?? step.id
    }

    init(id: String, handler: String, params: [String: JSONValue], sequenceName: String) {
        self.sequenceName = sequenceName
        self.id = id
        self.handler = handler
        self.params = params
        retry = nil
        timeout = nil
        cancellable = true
        wait = nil
        when = nil
        choiceValues = []
        choiceDetails = []
        waits = false
        waitTimeout = nil
        answerKey = id
    }
}

/// A loaded sequence in the form the interpreter walks: blocks flattened in document
/// order (pre-order, so a block's index is stable for its version), each block's child
/// lists as index lists, and a compiled kind and step settings per block.
final class Program: Sendable {
    let sequence: SequenceDefinition
    /// The JSON the sequence was loaded from (what the store keeps).
    let json: String
    let blocks: [Block]
    let kinds: [CompiledKind]
    let steps: [StepSpec?]
    /// Blocks that stop external cancellation at themselves (scopes, non-cancellable steps).
    let shields: [Bool]
    /// `lists[b]` are block `b`'s child lists, as indices into `blocks`.
    let lists: [[[Int32]]]
    let root: [Int32]
    let indexByID: [String: Int32]
    /// The most nodes an instance's tree can reach, when that is bounded (no loop or
    /// for_each): a tree copied with this much room never grows again.
    let treeBound: Int?
    /// Whether an instance can start child instances (the sequence has a sub_sequence).
    let startsChildren: Bool

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
        self.kinds = blocks.map { block in
            switch block {
            case .step: return .step
            case .router: return .router
            case .parallel: return .parallel
            case .race(let race): return .race(firstToSucceed: race.semantics == .firstToSucceed)
            case .loop: return .loop
            case .forEach: return .forEach
            case .tryCatch: return .tryCatch
            case .subSequence: return .subSequence
            case .abSplit: return .abSplit
            case .cancellationScope: return .cancellationScope
            }
        }
        self.steps = blocks.map { if case .step(let step) = $0 { return StepSpec(step, sequenceName: sequence.name) } else { return nil } }
        self.shields = blocks.map { block in
            switch block {
            case .cancellationScope: return true
            case .step(let step): return !step.cancellable
            default: return false
            }
        }
        var byID: [String: Int32] = [:]
        for (index, block) in blocks.enumerated() { byID[block.id] = Int32(index) }
        self.indexByID = byID
        self.treeBound = Self.treeBound(of: root, kinds: kinds, lists: lists)
        self.startsChildren = kinds.contains(.subSequence)
    }

    /// A list node, plus its blocks' nodes. A router or split instantiates one of its lists
    /// (the largest counts); a parallel, race, try/catch or scope (body and cleanup) may
    /// instantiate all.
    static func treeBound(of list: [Int32], kinds: [CompiledKind], lists: [[[Int32]]]) -> Int? {
        var total = 1
        for b in list {
            let children = lists[Int(b)].map { treeBound(of: $0, kinds: kinds, lists: lists) }
            guard !children.contains(where: { $0 == nil }) else { return nil }
            let sizes = children.map { $0! }
            switch kinds[Int(b)] {
            case .loop, .forEach: return nil
            case .step, .subSequence: total += 1
            case .router, .abSplit: total += 1 + (sizes.max() ?? 0)
            case .parallel, .race, .tryCatch, .cancellationScope: total += 1 + sizes.reduce(0, +)
            }
        }
        return total
    }

    /// The capacity to give a tree of `count` nodes when it is copied: its bound, or room
    /// for a few more nodes when it has none.
    func treeCapacity(for count: Int) -> Int { treeBound.map { max($0, count) } ?? count + 8 }

    /// A program of no blocks: what an idle interpreter holds.
    static let empty = Program(
        sequence: SequenceDefinition(id: "", tenantID: "", namespace: "", name: "", version: 0, deprecated: false, blocks: [],
                                     createdAt: nil, sizeBytes: 0),
        json: "")

    func list(_ kind: NodeKind) -> [Int32] {
        guard case .list(let owner, let list) = kind else { return [] }
        return owner < 0 ? root : lists[Int(owner)][Int(list)]
    }

    /// The step settings of a block node, or nil when the node is not a step.
    func step(_ kind: NodeKind) -> StepSpec? {
        guard case .block(let b) = kind else { return nil }
        return steps[Int(b)]
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
