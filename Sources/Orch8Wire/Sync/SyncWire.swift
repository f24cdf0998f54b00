public import LabKernel

// The wire shapes of orch8's `POST /mobile/sync` (wire-notes §a), shared by the device's
// SyncReporter and the reference server. Each type reads from and writes to `JSONValue`;
// decoding names the field that is wrong.

/// What a device sends on each sync.
public struct SyncRequest: Equatable, Sendable {
    /// The most of each array one request may carry (the server answers 400 beyond it).
    public static let arrayLimit = 500

    public var deviceID: String
    public var statusUpdates: [StatusUpdate] = []
    public var approvalRequests: [ApprovalRequest] = []
    public var stepDelegations: [StepDelegation] = []
    public var commandAcks: [String] = []

    public init(deviceID: String, statusUpdates: [StatusUpdate] = [], approvalRequests: [ApprovalRequest] = [],
                stepDelegations: [StepDelegation] = [], commandAcks: [String] = []) {
        self.deviceID = deviceID
        self.statusUpdates = statusUpdates
        self.approvalRequests = approvalRequests
        self.stepDelegations = stepDelegations
        self.commandAcks = commandAcks
    }

    public init(json: JSONValue) throws(JSONFieldError) {
        let f = try JSONFields(json)
        deviceID = try f.name("device_id")
        statusUpdates = try f.array("status_updates", limit: Self.arrayLimit) { v, p throws(JSONFieldError) in try StatusUpdate(json: v, path: p) }
        approvalRequests = try f.array("approval_requests", limit: Self.arrayLimit) { v, p throws(JSONFieldError) in try ApprovalRequest(json: v, path: p) }
        stepDelegations = try f.array("step_delegations", limit: Self.arrayLimit) { v, p throws(JSONFieldError) in try StepDelegation(json: v, path: p) }
        commandAcks = try f.array("command_acks", limit: Self.arrayLimit) { v, p throws(JSONFieldError) in
            guard case .string(let id) = v else { throw JSONFieldError(path: p, message: "must be a command id string, found \(v.kindName)") }
            return id
        }
    }

    public var json: JSONValue {
        ["device_id": .string(deviceID), "status_updates": .array(statusUpdates.map(\.json)),
         "approval_requests": .array(approvalRequests.map(\.json)), "step_delegations": .array(stepDelegations.map(\.json)),
         "command_acks": .array(commandAcks.map { .string($0) })]
    }
}

/// An instance's state as the device last saw it (coalesced per instance in the outbox).
public struct StatusUpdate: Equatable, Sendable {
    public var instanceID: String
    public var sequenceName: String?
    /// PascalCase, as the SDK sends it: `Running`, `Waiting`, `Completed`, …
    public var state: String
    public var currentStep: String?
    public var handler: String?
    /// RFC 3339.
    public var timestamp: String
    public var contextSummary: JSONValue?
    /// The step timeline: `[{block_id, block_type, state, handler, started_at, completed_at}]`.
    public var steps: JSONValue?

    public init(instanceID: String, sequenceName: String?, state: String, currentStep: String?, handler: String?,
                timestamp: String, contextSummary: JSONValue? = nil, steps: JSONValue? = nil) {
        self.instanceID = instanceID
        self.sequenceName = sequenceName
        self.state = state
        self.currentStep = currentStep
        self.handler = handler
        self.timestamp = timestamp
        self.contextSummary = contextSummary
        self.steps = steps
    }

    public init(json: JSONValue, path: String = "") throws(JSONFieldError) {
        let f = try JSONFields(json, path: path)
        instanceID = try f.name("instance_id")
        sequenceName = try f.optionalString("sequence_name")
        state = try f.name("state")
        currentStep = try f.optionalString("current_step")
        handler = try f.optionalString("handler")
        timestamp = try f.name("timestamp")
        contextSummary = f.optionalValue("context_summary")
        steps = f.optionalValue("steps")
        if let steps, steps.arrayValue == nil { throw JSONFieldError(path: f.at("steps"), message: "must be an array, found \(steps.kindName)") }
    }

    public var json: JSONValue {
        ["instance_id": .string(instanceID), "sequence_name": sequenceName.map(JSONValue.string) ?? .null, "state": .string(state),
         "current_step": currentStep.map(JSONValue.string) ?? .null, "handler": handler.map(JSONValue.string) ?? .null,
         "timestamp": .string(timestamp), "context_summary": contextSummary ?? .null, "steps": steps ?? .null]
    }
}

/// A step waiting for a person, which the dashboard lists for an operator.
public struct ApprovalRequest: Equatable, Sendable {
    public var instanceID: String
    public var blockID: String
    public var sequenceName: String?
    public var prompt: String?
    /// `[{label, value}]`, or nil for the default yes/no.
    public var choices: JSONValue?
    public var storeAs: String?
    public var timeoutSeconds: Int?
    public var metadata: JSONValue?

    public init(instanceID: String, blockID: String, sequenceName: String?, prompt: String?, choices: JSONValue?,
                storeAs: String?, timeoutSeconds: Int?, metadata: JSONValue? = nil) {
        self.instanceID = instanceID
        self.blockID = blockID
        self.sequenceName = sequenceName
        self.prompt = prompt
        self.choices = choices
        self.storeAs = storeAs
        self.timeoutSeconds = timeoutSeconds
        self.metadata = metadata
    }

    public init(json: JSONValue, path: String = "") throws(JSONFieldError) {
        let f = try JSONFields(json, path: path)
        instanceID = try f.name("instance_id")
        blockID = try f.name("block_id")
        sequenceName = try f.optionalString("sequence_name")
        prompt = try f.optionalString("prompt")
        choices = f.optionalValue("choices")
        if let choices {
            guard let items = choices.arrayValue else { throw JSONFieldError(path: f.at("choices"), message: "must be an array, found \(choices.kindName)") }
            for (index, item) in items.enumerated() {
                let c = try JSONFields(item, path: "\(f.at("choices"))[\(index)]")
                _ = try c.string("value")
            }
        }
        storeAs = try f.optionalString("store_as")
        timeoutSeconds = try f.optionalInt("timeout_seconds")
        metadata = f.optionalValue("metadata")
    }

    public var json: JSONValue {
        ["instance_id": .string(instanceID), "block_id": .string(blockID), "sequence_name": sequenceName.map(JSONValue.string) ?? .null,
         "prompt": prompt.map(JSONValue.string) ?? .null, "choices": choices ?? .null, "store_as": storeAs.map(JSONValue.string) ?? .null,
         "timeout_seconds": timeoutSeconds.map { .number(Double($0)) } ?? .null, "metadata": metadata ?? .null]
    }

    /// The outbox key: one approval per gate of an instance.
    public var key: String { "\(instanceID):\(blockID)" }
}

/// A step whose params name `credentials://` secrets, for the server to resolve.
public struct StepDelegation: Equatable, Sendable {
    public var requestID: String
    public var instanceID: String
    public var blockID: String
    public var handler: String
    public var params: JSONValue

    public init(requestID: String, instanceID: String, blockID: String, handler: String, params: JSONValue) {
        self.requestID = requestID
        self.instanceID = instanceID
        self.blockID = blockID
        self.handler = handler
        self.params = params
    }

    public init(json: JSONValue, path: String = "") throws(JSONFieldError) {
        let f = try JSONFields(json, path: path)
        requestID = try f.name("request_id")
        instanceID = try f.name("instance_id")
        blockID = try f.name("block_id")
        handler = try f.name("handler")
        params = f.optionalValue("params") ?? [:]
    }

    public var json: JSONValue {
        ["request_id": .string(requestID), "instance_id": .string(instanceID), "block_id": .string(blockID),
         "handler": .string(handler), "params": params]
    }

    public var key: String { "\(instanceID):\(blockID)" }
}

/// What the server answers a sync with.
public struct SyncResponse: Equatable, Sendable {
    public var commands: [SyncCommand]
    public var syncIntervalSecs: Int

    public init(commands: [SyncCommand], syncIntervalSecs: Int) {
        self.commands = commands
        self.syncIntervalSecs = syncIntervalSecs
    }

    /// Missing fields default as the SDK defaults them (no commands, 30 s).
    public init(json: JSONValue) throws(JSONFieldError) {
        let f = try JSONFields(json)
        commands = try f.array("commands") { v, p throws(JSONFieldError) in try SyncCommand(json: v, path: p) }
        syncIntervalSecs = try f.optionalInt("sync_interval_secs") ?? 30
    }

    public var json: JSONValue {
        ["commands": .array(commands.map(\.json)), "sync_interval_secs": .number(Double(syncIntervalSecs))]
    }
}

/// A command the server queued for a device.
public struct SyncCommand: Equatable, Sendable {
    public var id: String
    public var type: String
    public var payload: JSONValue

    public init(id: String, type: String, payload: JSONValue) {
        self.id = id
        self.type = type
        self.payload = payload
    }

    public init(json: JSONValue, path: String = "") throws(JSONFieldError) {
        let f = try JSONFields(json, path: path)
        id = try f.name("id")
        type = try f.name("type")
        payload = f.optionalValue("payload") ?? [:]
    }

    public var json: JSONValue { ["id": .string(id), "type": .string(type), "payload": payload] }
}

/// The command types orch8 defines.
public enum SyncCommandType: String, CaseIterable, Sendable {
    case completeStep = "complete_step"
    case cancelInstance = "cancel_instance"
    case startWorkflow = "start_workflow"
    case updateSequence = "update_sequence"
    case stepResult = "step_result"
}

/// The rollout policies of `update_sequence`.
public enum UpdatePolicy: String, CaseIterable, Sendable {
    case restart, graceful, fail, cancel
    case skipExecuted = "skip_executed"
}

