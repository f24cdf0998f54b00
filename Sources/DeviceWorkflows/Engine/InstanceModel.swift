public import LabKernel

/// An instance's lifecycle state, spelled as the real SDK reports it (`"Waiting"`).
public enum InstanceState: String, Sendable, CaseIterable, Codable {
    /// Created; its first step runs on the next tick.
    case scheduled = "Scheduled"
    /// Steps are running or ready to run.
    case running = "Running"
    /// A step waits for `completeStep`.
    case waiting = "Waiting"
    /// Held by an `update_sequence` (graceful) or an operator; no step starts.
    case paused = "Paused"
    case completed = "Completed"
    case failed = "Failed"
    case cancelled = "Cancelled"

    public var isTerminal: Bool {
        switch self {
        case .completed, .failed, .cancelled: return true
        case .scheduled, .running, .waiting, .paused: return false
        }
    }
}

/// The state of one node of the execution tree, lowercase as in the real timelines.
public enum NodeState: String, Sendable, Codable {
    case pending, running, waiting, completed, failed, cancelled, skipped

    var isFinished: Bool {
        switch self {
        case .completed, .failed, .cancelled, .skipped: return true
        case .pending, .running, .waiting: return false
        }
    }
}

/// What a node of the execution tree executes: a block, or a list of blocks.
public enum NodeKind: Sendable, Equatable, Hashable {
    /// Block `index` of the sequence's flattened block table.
    case block(Int32)
    /// List `list` of block `owner` (`owner == -1` is the sequence's top-level list).
    case list(owner: Int32, list: Int32)
}

/// One node of an instance's execution tree. Composite progress lives in `cursor`:
/// the next block of a list, the iteration of a loop, the chosen route or variant, the
/// phase of a try/catch.
public struct ExecNode: Sendable, Equatable {
    public var kind: NodeKind
    public var parent: Int32
    public var state: NodeState
    public var children: [Int32] = []
    public var cursor: Int32 = 0
    /// Attempts made of a step (1 after the first dispatch).
    public var attempt: Int16 = 0
    public var startedAt: Instant?
    public var completedAt: Instant?
    /// A step's next attempt is due (retry backoff).
    public var retryAt: Instant?
    /// A handler or an input wait times out.
    public var deadline: Instant?
    /// A handler invocation of this node is in flight.
    public var inFlight = false
    /// A step has passed its `wait_for_input` gate (the input is in).
    public var gatePassed = false
    /// The child instance a sub_sequence runs.
    public var childInstance: String?
    /// Items a for_each iterates over (snapshotted when it starts).
    public var items: [JSONValue]?
    public var error: String?

    public init(kind: NodeKind, parent: Int32, state: NodeState) {
        self.kind = kind
        self.parent = parent
        self.state = state
    }
}

/// A workflow instance: its context, execution tree and bookkeeping.
public struct WorkflowInstance: Sendable, Equatable {
    public var id: String
    public var sequenceName: String
    public var sequenceVersion: Int
    public var state: InstanceState
    public var data: [String: JSONValue]
    public var nodes: [ExecNode]
    public var dedupKey: String?
    public var createdAt: Instant
    public var updatedAt: Instant
    public var finishedAt: Instant?
    /// Order of creation on this engine; instances are always processed in this order.
    public var sequenceNumber: UInt64
    /// Steps dispatched so far (retries included), for `maxStepsPerInstance`.
    public var stepsExecuted: Int
    public var error: String?
    public var cancelRequested = false
    /// The instance and node of a parent running this one as a sub_sequence.
    public var parent: ParentLink?
    /// The stream this instance draws from (a_b_split).
    public var generator: SeededGenerator

    public struct ParentLink: Sendable, Equatable, Hashable {
        public var instanceID: String
        public var node: Int32
    }
}

/// What `activeInstances` and `getInstance` report.
public struct InstanceSummary: Sendable, Equatable {
    public var instanceID: String
    public var sequenceName: String
    public var state: InstanceState
    /// The first step that is waiting or running, if any.
    public var currentStep: String?
    public var createdAt: String
    public var updatedAt: String
    public var context: [String: JSONValue]
    public var error: String?
}

/// One line of a step timeline: a block in document order with its latest state.
public struct TimelineEntry: Sendable, Equatable {
    public var blockID: String
    public var blockType: String
    public var state: NodeState
    public var handler: String?
    public var startedAt: String?
    public var completedAt: String?

    public var json: JSONValue {
        [
            "block_id": .string(blockID), "block_type": .string(blockType), "state": .string(state.rawValue),
            "handler": handler.map { .string($0) } ?? .null, "started_at": startedAt.map { .string($0) } ?? .null,
            "completed_at": completedAt.map { .string($0) } ?? .null,
        ]
    }
}
