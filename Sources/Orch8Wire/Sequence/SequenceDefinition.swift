public import LabKernel

/// An orch8 sequence: a named, versioned workflow of blocks.
public struct SequenceDefinition: Sendable, Equatable {
    public var id: String
    public var tenantID: String
    public var namespace: String
    public var name: String
    public var version: Int
    public var deprecated: Bool
    public var blocks: [Block]
    public var createdAt: String?
    /// Size of the JSON the definition was loaded from (for `maxSequenceSizeBytes`).
    public var sizeBytes: Int

    public init(id: String, tenantID: String, namespace: String, name: String, version: Int, deprecated: Bool, blocks: [Block],
                createdAt: String?, sizeBytes: Int) {
        self.id = id
        self.tenantID = tenantID
        self.namespace = namespace
        self.name = name
        self.version = version
        self.deprecated = deprecated
        self.blocks = blocks
        self.createdAt = createdAt
        self.sizeBytes = sizeBytes
    }

    /// Every handler any step of the sequence names, sorted.
    public var handlers: [String] {
        var names: Set<String> = []
        Block.visit(blocks) { if case .step(let s) = $0 { names.insert(s.handler) } }
        return names.sorted()
    }

    /// Every step id, in document order (the seed's "Step Count Verification").
    public var stepIDs: [String] {
        var ids: [String] = []
        Block.visit(blocks) { if case .step(let s) = $0 { ids.append(s.id) } }
        return ids
    }
}

/// The kinds of block, with the spelling the real engine reports in step timelines.
public enum BlockKind: String, Sendable, CaseIterable {
    case step, router, parallel, race, loop
    case forEach = "for_each"
    case tryCatch = "try_catch"
    case subSequence = "sub_sequence"
    case abSplit = "ab_split"
    case cancellationScope = "cancellation_scope"
}

/// One block of a sequence.
public indirect enum Block: Sendable, Equatable {
    case step(StepBlock)
    case router(RouterBlock)
    case parallel(ParallelBlock)
    case race(RaceBlock)
    case loop(LoopBlock)
    case forEach(ForEachBlock)
    case tryCatch(TryCatchBlock)
    case subSequence(SubSequenceBlock)
    case abSplit(ABSplitBlock)
    case cancellationScope(CancellationScopeBlock)

    public var id: String {
        switch self {
        case .step(let b): return b.id
        case .router(let b): return b.id
        case .parallel(let b): return b.id
        case .race(let b): return b.id
        case .loop(let b): return b.id
        case .forEach(let b): return b.id
        case .tryCatch(let b): return b.id
        case .subSequence(let b): return b.id
        case .abSplit(let b): return b.id
        case .cancellationScope(let b): return b.id
        }
    }

    public var kind: BlockKind {
        switch self {
        case .step: return .step
        case .router: return .router
        case .parallel: return .parallel
        case .race: return .race
        case .loop: return .loop
        case .forEach: return .forEach
        case .tryCatch: return .tryCatch
        case .subSequence: return .subSequence
        case .abSplit: return .abSplit
        case .cancellationScope: return .cancellationScope
        }
    }

    /// The block lists nested directly inside this block.
    public var childLists: [[Block]] {
        switch self {
        case .step, .subSequence: return []
        case .router(let b): return b.routes.map(\.blocks) + (b.defaultBlocks.map { [$0] } ?? [])
        case .parallel(let b): return b.branches
        case .race(let b): return b.branches
        case .loop(let b): return [b.body]
        case .forEach(let b): return [b.body]
        case .tryCatch(let b): return [b.tryBlocks, b.catchBlocks] + (b.finallyBlocks.map { [$0] } ?? [])
        case .abSplit(let b): return b.variants.map(\.blocks)
        case .cancellationScope(let b): return [b.blocks] + (b.cleanup.map { [$0] } ?? [])
        }
    }

    /// Visits every block in document order, depth first.
    public static func visit(_ blocks: [Block], _ body: (Block) -> Void) {
        for block in blocks {
            body(block)
            for list in block.childLists { visit(list, body) }
        }
    }
}

public struct Choice: Sendable, Equatable {
    public var label: String
    public var value: String
    public init(label: String, value: String) {
        self.label = label
        self.value = value
    }
}

public struct WaitForInput: Sendable, Equatable {
    public var prompt: String
    public var timeout: TimeSpan?
    /// nil: the generic Approve/Reject (values `yes`/`no`, as the real engine defaults).
    public var choices: [Choice]?
    public var storeAs: String?

    public static let defaultChoices = [Choice(label: "Approve", value: "yes"), Choice(label: "Reject", value: "no")]
    public var effectiveChoices: [Choice] { choices ?? Self.defaultChoices }
}

public struct RetryPolicy: Sendable, Equatable {
    public var maxAttempts: Int
    public var initialBackoff: TimeSpan
    public var maxBackoff: TimeSpan
    public var multiplier: Double

    /// The delay before attempt `attempt + 1` after attempt `attempt` failed (attempts from 1).
    public func backoff(after attempt: Int) -> TimeSpan {
        var delay = Double(initialBackoff.nanoseconds)
        for _ in 1..<max(1, attempt) { delay *= multiplier }
        // Compared in floating point, converted only below the cap: `Double(Int64.max)`
        // rounds up past what `Int64(_:)` accepts.
        return delay >= Double(maxBackoff.nanoseconds) ? maxBackoff : TimeSpan(nanoseconds: Int64(delay))
    }
}

public struct StepBlock: Sendable, Equatable {
    public var id: String
    public var handler: String
    public var params: [String: JSONValue]
    public var retry: RetryPolicy?
    public var timeout: TimeSpan?
    public var cancellable: Bool
    public var waitForInput: WaitForInput?
    public var when: Expression?
}

public struct Route: Sendable, Equatable {
    public var condition: Expression
    public var blocks: [Block]
}

public struct RouterBlock: Sendable, Equatable {
    public var id: String
    public var routes: [Route]
    public var defaultBlocks: [Block]?
}

public struct ParallelBlock: Sendable, Equatable {
    public var id: String
    public var branches: [[Block]]
}

public enum RaceSemantics: String, Sendable, Equatable {
    /// The first branch to finish, successfully or not, decides.
    case firstToResolve = "first_to_resolve"
    /// The first branch to succeed wins; the race fails only when every branch failed.
    case firstToSucceed = "first_to_succeed"
}

public struct RaceBlock: Sendable, Equatable {
    public var id: String
    public var branches: [[Block]]
    public var semantics: RaceSemantics
}

public struct LoopBlock: Sendable, Equatable {
    public var id: String
    public var condition: Expression
    public var body: [Block]
    public var maxIterations: Int
    public var breakOn: Expression?
    public var continueOnError: Bool
}

public struct ForEachBlock: Sendable, Equatable {
    public var id: String
    public var collection: Expression
    public var itemVar: String
    public var body: [Block]
    public var maxIterations: Int
}

public struct TryCatchBlock: Sendable, Equatable {
    public var id: String
    public var tryBlocks: [Block]
    public var catchBlocks: [Block]
    public var finallyBlocks: [Block]?
}

public struct SubSequenceBlock: Sendable, Equatable {
    public var id: String
    public var sequenceName: String
    public var version: Int?
    public var input: [String: JSONValue]
}

public struct Variant: Sendable, Equatable {
    public var name: String
    public var weight: UInt32
    public var blocks: [Block]
}

public struct ABSplitBlock: Sendable, Equatable {
    public var id: String
    public var variants: [Variant]
}

/// Blocks an external cancel does not interrupt: they run to their end first. With
/// `cleanup` (the seed's "cleanup handler"; also read as `on_cancel`), a cancel that
/// arrives while the scope runs also runs the cleanup blocks, shielded in turn, before
/// the instance ends cancelled; without a cancel they never run.
public struct CancellationScopeBlock: Sendable, Equatable {
    public var id: String
    public var blocks: [Block]
    public var cleanup: [Block]?

    public init(id: String, blocks: [Block], cleanup: [Block]? = nil) {
        self.id = id
        self.blocks = blocks
        self.cleanup = cleanup
    }
}
