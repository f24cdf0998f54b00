public import LabKernel
public import Orch8Wire

/// Identifies one attempt of one step of one instance; stable across app restarts (the
/// instance's number, node and attempt are all stored), so a result journaled before a
/// crash is found again when the step is re-dispatched.
public struct InvocationKey: Hashable, Sendable, Comparable, CustomStringConvertible {
    /// The instance's number on its engine (`WorkflowInstance.sequenceNumber`).
    public var instance: UInt64
    public var node: Int32
    public var attempt: Int16

    public init(instance: UInt64, node: Int32, attempt: Int16) {
        self.instance = instance
        self.node = node
        self.attempt = attempt
    }

    public var description: String { "\(instance)/\(node)/\(attempt)" }

    /// One word into the hasher instead of three fields (a step hashes its key for the
    /// journal and the dispatch queue); equal keys pack to equal words.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(instance &* 0x9E37_79B9_7F4A_7C15 ^ UInt64(UInt32(bitPattern: node)) << 16 ^ UInt64(UInt16(bitPattern: attempt)))
    }

    public static func < (a: InvocationKey, b: InvocationKey) -> Bool {
        (a.instance, a.node, a.attempt) < (b.instance, b.node, b.attempt)
    }
}

/// A handler call the driver must make.
public struct HandlerInvocation: Sendable, Equatable {
    public var key: InvocationKey
    public var instanceID: InstanceID
    /// The instance's context.data when the step was dispatched (sharing the engine's).
    public var context: ContextData
    public var data: [String: JSONValue] { context.dictionary }
    /// The step's settings, shared with the loaded sequence: an invocation is moved
    /// through several buffers, and one reference is cheaper than four.
    let step: StepSpec

    public var sequenceName: String { step.sequenceName }
    public var blockID: String { step.id }
    public var handler: String { step.handler }
    /// The step's params alone.
    public var params: [String: JSONValue] { step.params }

    init(key: InvocationKey, instanceID: InstanceID, step: StepSpec, context: ContextData) {
        self.key = key
        self.instanceID = instanceID
        self.step = step
        self.context = context
    }

    /// An invocation of a step outside a loaded sequence (a delegated step coming back).
    public init(key: InvocationKey, instanceID: InstanceID, sequenceName: String, blockID: String, handler: String,
                params: [String: JSONValue], data: [String: JSONValue]) {
        self.init(key: key, instanceID: instanceID,
                  step: StepSpec(id: blockID, handler: handler, params: params, sequenceName: sequenceName), context: ContextData(data))
    }

    public static func == (a: HandlerInvocation, b: HandlerInvocation) -> Bool {
        a.key == b.key && a.instanceID == b.instanceID && a.context == b.context && a.sequenceName == b.sequenceName
            && a.blockID == b.blockID && a.handler == b.handler && a.params == b.params
    }

    /// The step's params merged over context.data (params win), as the seed specifies;
    /// merged on demand, since most handlers never look.
    public var input: JSONValue {
        var merged = context.dictionary
        for (name, value) in params { merged[name] = value }
        return .object(merged)
    }
}

/// How a handler call ended.
public enum HandlerOutcome: Sendable, Equatable {
    case success(JSONValue)
    /// A failure the retry policy may retry.
    case retryable(String)
    /// A failure no retry can fix.
    case permanent(String)
}

/// A locally recorded telemetry event (flushed to the server by the sync issue).
public struct TelemetryEvent: Sendable, Equatable {
    public enum Kind: String, Sendable {
        case stepStarted = "step_started"
        case stepCompleted = "step_completed"
        case stepFailed = "step_failed"
        case instanceStateChanged = "instance_state_changed"
    }
    public var kind: Kind
    public var instanceID: InstanceID
    public var blockID: String?
    public var detail: String
    public var timestamp: String

    public init(kind: Kind, instanceID: InstanceID, blockID: String?, detail: String, timestamp: String) {
        self.kind = kind
        self.instanceID = instanceID
        self.blockID = blockID
        self.detail = detail
        self.timestamp = timestamp
    }
}

/// An instance as the engine flushed it, shared by reference: the in-memory store keeps
/// the very object (a persist neither copies nor destroys an instance on its way in), and
/// the effect stays the size of the others.
///
/// A snapshot a store has let go of can go back to the engine for a later flush, with its
/// tree's buffer (see `InstanceSnapshot+Recycling.swift`).
public final class InstanceSnapshot: @unchecked Sendable, Equatable {
    // Unchecked because `instance` changes, but only in `reuse` and `retire`, which run on
    // a snapshot nothing else holds (`SpareSnapshots.pop` checks that before handing one
    // out), so no other owner, on any thread, can see it change.
    public private(set) var instance: WorkflowInstance
    /// A retired snapshot's tree buffer, kept for the engine's next copy of a tree.
    var spareTree: [ExecNode] = []

    public init(_ instance: WorkflowInstance) { self.instance = instance }
    public static func == (a: InstanceSnapshot, b: InstanceSnapshot) -> Bool { a.instance == b.instance }

    /// Takes the tree's buffer aside for reuse. The rest of the instance stays until
    /// `reuse` replaces it (releasing it then costs what freeing it now would; replacing
    /// it now with a placeholder would cost a copy more).
    func retire() {
        swap(&spareTree, &instance.nodes)
    }

    /// Makes this retired snapshot a snapshot of `live`: the header shared, the tree
    /// copied into the buffer this snapshot kept, growing that buffer (to `capacity`) only
    /// if the tree outgrew it. `live` keeps its own tree where it is (and is not changed:
    /// passed `inout` so it is not copied on the way in).
    func reuse(for live: inout WorkflowInstance, capacity: Int) {
        var tree: [ExecNode] = []
        swap(&tree, &spareTree)
        tree.removeAll(keepingCapacity: true)
        if tree.capacity < live.nodes.count { tree.reserveCapacity(capacity) }
        tree.append(contentsOf: live.nodes)
        var header = copy live
        swap(&tree, &header.nodes)
        instance = header
    }
}

/// Everything the engine asks its driver to do. Effects come out in the order the driver
/// must apply them; storage effects of one tick are safe to commit in one transaction.
public enum EngineEffect: Sendable, Equatable {
    /// Call a handler; answer with `handlerFinished`.
    case invoke(HandlerInvocation)
    /// Store the instance as it is now (replacing any earlier snapshot).
    case persist(InstanceSnapshot)
    /// Remove an instance (garbage collection).
    case delete(instanceID: InstanceID, number: UInt64)
    /// Store a loaded sequence definition (its JSON) so a restart has it.
    case storeSequence(name: String, version: Int, json: String)
    case removeSequence(name: String, version: Int)
    /// Telemetry recorded since the last flush, oldest first: one effect per flush, not
    /// per event (a tick of ten thousand instances records tens of thousands).
    case telemetry([TelemetryEvent])
    /// Listener callbacks (the seed's `EngineListener`). The output is the instance's
    /// context.data, shared with it: a listener that wants JSON asks for `.json`.
    case instanceCompleted(instanceID: InstanceID, output: ContextData)
    case instanceFailed(instanceID: InstanceID, error: String)
    case stepPending(instanceID: InstanceID, stepName: String, handler: String)

    /// An effect for the store (`WorkflowStore.apply`), told apart without copying it.
    public var isStorage: Bool {
        switch self {
        case .persist, .delete, .storeSequence, .removeSequence, .telemetry: return true
        case .invoke, .instanceCompleted, .instanceFailed, .stepPending: return false
        }
    }
}

/// Errors the engine's API returns, the orch8 `MobileError` cases.
public enum MobileEngineError: Error, Sendable, Equatable, CustomStringConvertible {
    case invalidInput(String)
    case notFound(String)
    case resourceLimit(String)
    case alreadyExists(String)
    case shutdown
    case invalidSequence(SequenceValidationError)

    public var description: String {
        switch self {
        case .invalidInput(let m): return "invalid input: \(m)"
        case .notFound(let m): return "not found: \(m)"
        case .resourceLimit(let m): return "resource limit: \(m)"
        case .alreadyExists(let m): return "already exists: \(m)"
        case .shutdown: return "the engine is shut down"
        case .invalidSequence(let e): return "invalid sequence:\n\(e)"
        }
    }
}

extension HandlerInvocation {
    /// What an invocation slot holds after its invocation was moved out (a driver swaps
    /// each invocation into one reused call).
    package static let vacant = HandlerInvocation(key: InvocationKey(instance: 0, node: -1, attempt: 0), instanceID: .zero,
                                                  step: StepSpec(id: "", handler: "", params: [:], sequenceName: ""), context: ContextData())
}
