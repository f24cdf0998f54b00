public import LabKernel
public import Orch8Wire

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
///
/// Plain data on purpose, and one cache line: children are linked (`firstChild`/
/// `nextSibling`) and the rare fields (errors, for_each items) live in side tables of the
/// instance, so copying a tree (every persisted snapshot does) is a memory copy, not a
/// retain per field. Times are raw nanoseconds with a sentinel for "none", and a retry
/// time, a deadline and a child instance share one slot: a step has a retry pending only
/// between attempts, a deadline only during an attempt or a wait, and only a sub_sequence
/// node has a child. 64 bytes a node (it was 128 with four `Instant?` fields, then 88).
public struct ExecNode: Sendable, Equatable {
    @PackedInstant public var startedAt: Instant? = nil
    @PackedInstant public var completedAt: Instant? = nil
    private var slot: Int64 = 0
    public var parent: Int32
    public var cursor: Int32 = 0
    public var firstChild: Int32 = -1
    public var lastChild: Int32 = -1
    public var nextSibling: Int32 = -1
    public var childCount: Int32 = 0
    public var kind: NodeKind
    /// Attempts made of a step (1 after the first dispatch).
    public var attempt: Int16 = 0
    public var state: NodeState
    /// A handler invocation of this node is in flight.
    public var inFlight = false
    /// A step has passed its `wait_for_input` gate (the input is in).
    public var gatePassed = false
    private var slotUse = SlotUse.none

    private enum SlotUse: UInt8, Sendable {
        case none, retry, deadline, child
    }

    /// A step's next attempt is due (retry backoff).
    public var retryAt: Instant? {
        get { slotUse == .retry ? Instant(nanoseconds: slot) : nil }
        set { setSlot(.retry, newValue?.nanoseconds) }
    }

    /// A handler or an input wait times out.
    public var deadline: Instant? {
        get { slotUse == .deadline ? Instant(nanoseconds: slot) : nil }
        set { setSlot(.deadline, newValue?.nanoseconds) }
    }

    /// The number of the child instance a sub_sequence runs.
    public var childInstance: UInt64? {
        get { slotUse == .child ? UInt64(bitPattern: slot) : nil }
        set { setSlot(.child, newValue.map { Int64(bitPattern: $0) }) }
    }

    /// Sets the slot to `value` for `use`; clearing clears it only if it holds that use.
    private mutating func setSlot(_ use: SlotUse, _ value: Int64?) {
        if let value {
            slot = value
            slotUse = use
        } else if slotUse == use {
            slot = 0
            slotUse = .none
        }
    }

    public init(kind: NodeKind, parent: Int32, state: NodeState) {
        self.kind = kind
        self.parent = parent
        self.state = state
    }
}

/// An optional instant in 8 bytes instead of 16: raw nanoseconds, with a sentinel for
/// none (no instant a simulation or a clock produces is that far in the past).
@propertyWrapper
public struct PackedInstant: Sendable, Equatable {
    private var raw: Int64
    private static let none = Int64.min

    public init(wrappedValue: Instant?) { raw = wrappedValue?.nanoseconds ?? Self.none }

    public var wrappedValue: Instant? {
        get { raw == Self.none ? nil : Instant(nanoseconds: raw) }
        set { raw = newValue?.nanoseconds ?? Self.none }
    }
}

/// An instance's id: a UUID (orch8's ids are), kept as its 16 bytes. Events and
/// effects of every step carry it; as text it was a heap string each of them retained,
/// and the cache miss of reading that string's object, an instance apart, came back in
/// every place that touched it (docs/benchmarks.md, "Workflow engine"). `text` is the id
/// as stores, listeners and the API write it.
public typealias InstanceID = UUIDValue

/// A workflow instance: its context, execution tree and bookkeeping.
///
/// What changes on every step is stored inline; what rarely changes (names, errors,
/// for_each items, update bookkeeping) is in a `Details` box shared between versions
/// until one of them changes it (see `WorkflowInstance+Details.swift`). An instance is
/// copied into every snapshot and swapped through the interpreter on every walk: boxed,
/// it is 128 bytes with four references instead of 256 with nine. The id is inline (read
/// on every step; a box would be a cache miss more), and the version and step count are
/// 32-bit (the step count unsigned, as wide as `maxStepsPerInstance`), so that it stays
/// in those 128 bytes.
public struct WorkflowInstance: Sendable, Equatable {
    var details: Details
    /// `context.data` (see `ContextData`: versions share structure).
    public var data: ContextData
    public var nodes: [ExecNode]
    public var createdAt: Instant
    public var updatedAt: Instant
    @PackedInstant public var finishedAt: Instant?
    /// Order of creation on this engine; instances are always processed in this order.
    public var sequenceNumber: UInt64
    /// The stream this instance draws from (a_b_split).
    public var generator: SeededGenerator
    public let instanceID: InstanceID
    private var storedVersion: Int32
    private var storedStepsExecuted: UInt32
    public var state: InstanceState
    public var cancelRequested = false

    public var sequenceVersion: Int {
        get { Int(storedVersion) }
        set { storedVersion = Int32(clamping: newValue) }
    }

    /// Steps dispatched so far (retries included), for `maxStepsPerInstance`.
    public var stepsExecuted: Int {
        get { Int(storedStepsExecuted) }
        set { storedStepsExecuted = UInt32(clamping: newValue) }
    }

    /// The id as text.
    public var id: String { instanceID.text }

    init(id: InstanceID, sequenceName: String, sequenceVersion: Int, state: InstanceState, data: ContextData, nodes: [ExecNode],
         nodeErrors: [Int32: String] = [:], forEachItems: [Int32: [JSONValue]] = [:], dedupKey: String?, createdAt: Instant,
         updatedAt: Instant, finishedAt: Instant?, sequenceNumber: UInt64, stepsExecuted: Int, error: String?,
         cancelRequested: Bool = false, parent: ParentLink?, generator: SeededGenerator, skipSteps: Set<String> = [],
         pendingUpdate: PendingUpdate? = nil) {
        details = Details(sequenceName: sequenceName, dedupKey: dedupKey, error: error, parent: parent, nodeErrors: nodeErrors,
                          forEachItems: forEachItems, skipSteps: skipSteps, pendingUpdate: pendingUpdate)
        self.instanceID = id
        self.storedVersion = Int32(clamping: sequenceVersion)
        self.state = state
        self.data = data
        self.nodes = nodes
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.finishedAt = finishedAt
        self.sequenceNumber = sequenceNumber
        self.storedStepsExecuted = UInt32(clamping: stepsExecuted)
        self.generator = generator
        self.cancelRequested = cancelRequested
    }

    public struct PendingUpdate: Sendable, Equatable, Hashable {
        public var sequenceName: String
        public var version: Int
    }

    public struct ParentLink: Sendable, Equatable, Hashable {
        public var instance: UInt64
        public var node: Int32
    }

    // MARK: Children

    /// The children of node `n`, in order.
    public func children(of n: Int32) -> [Int32] {
        var out: [Int32] = []
        out.reserveCapacity(Int(nodes[Int(n)].childCount))
        var c = nodes[Int(n)].firstChild
        while c >= 0 {
            out.append(c)
            c = nodes[Int(c)].nextSibling
        }
        return out
    }

    /// The `i`th child of node `n`.
    public func child(of n: Int32, at i: Int) -> Int32 {
        var c = nodes[Int(n)].firstChild
        for _ in 0..<i { c = nodes[Int(c)].nextSibling }
        return c
    }

    /// Appends a pending child of `kind` to node `n` and returns it.
    @discardableResult
    public mutating func addChild(of n: Int32, kind: NodeKind) -> Int32 {
        let child = Int32(nodes.count)
        nodes.append(ExecNode(kind: kind, parent: n, state: .pending))
        if nodes[Int(n)].lastChild >= 0 {
            nodes[Int(nodes[Int(n)].lastChild)].nextSibling = child
        } else {
            nodes[Int(n)].firstChild = child
        }
        nodes[Int(n)].lastChild = child
        nodes[Int(n)].childCount += 1
        return child
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
