public import LabKernel
public import Orch8Wire

/// The device side of orch8 sync, for any driver that owns an engine and its store: the
/// `EngineHost` (CLI, tests, live devices) and the simulator's devices. The drivers differ
/// only in how a request travels; everything else is here, once: `sync(_:)` runs the
/// `SyncClient` core and carries its effects out against the store and the engine.
///
/// The outbox is filled as the engine's effects are applied, in their transaction; a
/// request is built from it; the server's commands are applied exactly once: a command's
/// executed marker is written in the same transaction as the instance changes it causes,
/// and a command already marked is only acknowledged again. A failure that may pass (the
/// sequence is not loaded yet, an engine limit) rolls the marker back and leaves the
/// command unacknowledged, so the server sends it again; anything that can never apply
/// (an unknown instance, a value outside the step's choices, an unknown command type) is
/// marked and acknowledged.
public protocol SyncDriver {
    associatedtype Store: WorkflowStore
    var engine: MobileEngine { get set }
    var store: Store { get set }
    var syncClient: SyncClient? { get set }
    /// The time the driver's calls happen at.
    var syncClock: Instant { get }
    var syncWallClock: WallClockOrigin { get }
    /// Handlers a `step_result` may run.
    var syncHandlers: [String: BuiltinHandler] { get }
    /// Applies engine effects produced by a command, in the open batch (storage effects),
    /// or hands them to the driver (invocations, callbacks).
    mutating func applyCommandEffects(_ effects: inout [EngineEffect]) throws
    mutating func beginBatch() throws
    mutating func commitBatch() throws
    mutating func rollbackBatch()
    /// Counts a handler the device ran for a delegated step.
    mutating func countDelegatedRun()
    /// Called before the sync client reads the outbox: a driver that queued statuses to be
    /// built later builds them now (`InMemoryWorkflowStore.completeStatus`).
    mutating func outboxWillBeRead() throws
}

extension SyncDriver {
    public mutating func outboxWillBeRead() throws {}
}

/// What one `sync(_:)` call produced.
public struct SyncStep: Sendable {
    /// The request to send now.
    public var send: SyncRequest?
    /// What the commands of a settled batch did.
    public var report: CommandReport?
    /// A failed request: when the client tries again.
    public var backOffUntil: Instant?

    public init() {}
}

public struct CommandReport: Equatable, Sendable {
    public var applied: [String] = []
    public var duplicates: [String] = []
    /// Refused for good (acknowledged anyway), with why.
    public var refused: [(id: String, reason: String)] = []
    /// Left for the server to send again, with why.
    public var deferred: [(id: String, reason: String)] = []
    /// Instances `start_workflow` and restarts created, by command id.
    public var started: [(command: String, instanceID: String)] = []

    public init() {}

    public static func == (a: CommandReport, b: CommandReport) -> Bool {
        a.applied == b.applied && a.duplicates == b.duplicates && a.refused.map(\.id) == b.refused.map(\.id)
            && a.deferred.map(\.id) == b.deferred.map(\.id)
    }
}

public enum SyncOutboxWriter {
    public static let credentialScheme = "credentials://"

    /// Whether an invocation names secrets the server must resolve.
    public static func delegates(_ invocation: HandlerInvocation) -> Bool {
        JSONValue.object(invocation.params).containsString(prefix: credentialScheme)
    }

    public static func requestID(_ invocation: HandlerInvocation) -> String {
        "\(invocation.instanceID):\(invocation.blockID):\(invocation.key.attempt)"
    }
}

extension SyncDriver {
    // MARK: Filling the outbox

    public mutating func queueStatus(_ instanceID: InstanceID) throws {
        guard let status = engine.statusUpdate(of: instanceID, now: syncClock) else { return }
        try store.enqueue(.status(status))
    }

    public mutating func queueApproval(_ instanceID: String, step: String) throws {
        guard let approval = engine.approvalRequest(instanceID: instanceID, step: step) else { return }
        try store.enqueue(.approval(approval))
    }

    /// A step whose params name secrets: the server resolves them and answers with a
    /// `step_result`; the handler runs then, with the secrets held in memory only.
    public mutating func queueDelegation(_ invocation: HandlerInvocation) throws {
        let requestID = SyncOutboxWriter.requestID(invocation)
        let delegation = StepDelegation(requestID: requestID, instanceID: invocation.instanceID.text, blockID: invocation.blockID,
                                        handler: invocation.handler, params: .object(invocation.params))
        try store.enqueue(.delegation(delegation))
        try store.setSyncValue("delegation:" + requestID, "\(invocation.key.instance)/\(invocation.key.node)/\(invocation.key.attempt)")
        engine.holdForDelegation(invocation.key)
    }

    // MARK: Requests and answers

    /// Gives the sync client `input` and carries out its effects: reads the outbox when
    /// it asks, settles a batch the server took (the entries leave the outbox, the acks
    /// are done, the commands run exactly once). Returns the request to send now, if any,
    /// and what a settled batch's commands did.
    @discardableResult
    public mutating func sync(_ input: SyncClient.Input) throws -> SyncStep {
        guard syncClient != nil else { return SyncStep() }
        var step = SyncStep()
        var inputs = [input]
        while !inputs.isEmpty {
            let next = inputs.removeFirst()
            for effect in syncClient!.handle(next, now: syncClock) {
                switch effect {
                case .readOutbox(let limits):
                    try outboxWillBeRead()
                    inputs.append(.outboxRead(try readOutbox(limits)))
                case .send(let request):
                    step.send = request
                case .settle(let sent, let commands):
                    step.report = try settle(sent, commands: commands)
                case .backOff(let until):
                    step.backOffUntil = until
                }
            }
        }
        return step
    }

    /// The oldest entries of each kind and the pending acks, within `limits`.
    func readOutbox(_ limits: OutboxLimits) throws -> OutboxBatch {
        let entries = try store.outbox(.status, limit: limits.statuses) + store.outbox(.approval, limit: limits.approvals)
            + store.outbox(.delegation, limit: limits.delegations)
        return OutboxBatch(entries: entries, acks: try store.pendingAcks(limit: limits.acks))
    }

    /// The server took `sent`: it leaves the outbox and its acks are done, in one
    /// transaction; then each command runs (see `execute`), and executed markers older
    /// than 30 days (the SDK's horizon) are forgotten.
    mutating func settle(_ sent: SentBatch, commands: [SyncCommand]) throws -> CommandReport {
        try beginBatch()
        try store.removeSent(sent.entries)
        try store.acknowledged(sent.acks)
        try commitBatch()
        var report = CommandReport()
        for command in commands { try execute(command, report: &report) }
        try store.pruneExecuted(before: syncClock - .days(30))
        return report
    }

    // MARK: Commands

    mutating func execute(_ command: SyncCommand, report: inout CommandReport) throws {
        if try store.isExecuted(command.id) {
            try store.reacknowledge(command.id)
            report.duplicates.append(command.id)
            return
        }
        try beginBatch()
        try store.markExecuted(command.id, at: syncClock)
        var effects: [EngineEffect] = []
        let outcome = run(command, into: &effects)
        if case .deferred(let reason) = outcome {
            rollbackBatch()
            report.deferred.append((command.id, reason))
            return
        }
        try applyCommandEffects(&effects)
        try commitBatch()
        switch outcome {
        case .applied(let started):
            report.applied.append(command.id)
            if let started { report.started.append((command.id, started)) }
        case .refused(let reason): report.refused.append((command.id, reason))
        case .deferred: break
        }
    }

    mutating func run(_ command: SyncCommand, into effects: inout [EngineEffect]) -> CommandOutcome {
        let p = command.payload
        let now = syncClock
        guard let type = SyncCommandType(rawValue: command.type) else { return .refused("unknown command type \(command.type)") }
        do {
            switch type {
            case .completeStep:
                guard let id = p["instance_id"]?.stringValue, let step = p["step_name"]?.stringValue ?? p["block_id"]?.stringValue else {
                    return .refused("complete_step needs instance_id and step_name")
                }
                try engine.completeStep(id, stepName: step, output: p["output"] ?? [:], now: now, into: &effects)
            case .cancelInstance:
                guard let id = p["instance_id"]?.stringValue else { return .refused("cancel_instance needs instance_id") }
                try engine.cancelInstance(id, now: now, into: &effects)
            case .startWorkflow:
                guard let name = p["sequence_name"]?.stringValue else { return .refused("start_workflow needs sequence_name") }
                let id = try engine.start(name, input: p["input"] ?? [:], dedupKey: p["dedup_key"]?.stringValue, now: now, into: &effects)
                return .applied(started: id)
            case .updateSequence:
                guard let id = p["instance_id"]?.stringValue else { return .refused("update_sequence needs instance_id") }
                guard let policy = UpdatePolicy(rawValue: p["policy"]?.stringValue ?? "restart") else {
                    return .refused("unknown update policy \(p["policy"]?.stringValue ?? "")")
                }
                let created = try engine.updateInstance(id, policy: policy, sequenceName: p["sequence_name"]?.stringValue, input: p["input"],
                                                        now: now, into: &effects)
                return .applied(started: created)
            case .stepResult:
                return try deliverStepResult(p, into: &effects)
            }
        } catch let error as MobileEngineError {
            switch error {
            case .resourceLimit(let m): return .deferred("resource limit: \(m)")
            case .notFound(let m) where m.hasPrefix("sequence"): return .deferred("not found: \(m)")
            case .shutdown: return .deferred("the engine is shut down")
            case .notFound, .invalidInput, .alreadyExists, .invalidSequence: return .refused(error.description)
            }
        } catch {
            return .refused("\(error)")
        }
        return .applied(started: nil)
    }

    /// Runs a delegated step's handler with the resolved params and hands its result to the
    /// engine. Secrets never reach storage: the params live only for this call, and any
    /// resolved secret a handler echoes in its output is replaced by `[redacted]`.
    mutating func deliverStepResult(_ p: JSONValue, into effects: inout [EngineEffect]) throws -> CommandOutcome {
        guard let requestID = p["request_id"]?.stringValue else { return .refused("step_result needs request_id") }
        guard let stored = try store.syncValue("delegation:" + requestID) else { return .refused("no delegation \(requestID) is waiting") }
        let parts = stored.split(separator: "/").compactMap { Int64($0) }
        guard parts.count == 3 else { return .refused("delegation \(requestID) is unreadable") }
        let key = InvocationKey(instance: UInt64(parts[0]), node: Int32(parts[1]), attempt: Int16(parts[2]))
        try store.setSyncValue("delegation:" + requestID, nil)
        let outcome: HandlerOutcome
        if p["success"]?.boolValue == true {
            let resolved = p["resolved_params"]?.objectValue ?? [:]
            let name = p["handler"]?.stringValue ?? ""
            if let handler = syncHandlers[name] {
                // The instance is the one the delegation was stored for, as this device
                // knows it (an instance gone since has its result ignored below anyway).
                let instanceID = engine.indexByNumber[key.instance].map { engine.instances[$0].instanceID } ?? .zero
                let invocation = HandlerInvocation(key: key, instanceID: instanceID, sequenceName: "",
                                                   blockID: p["block_id"]?.stringValue ?? "", handler: name, params: resolved, data: [:])
                let result = handler(HandlerCall(invocation: invocation, now: syncClock, wallClock: syncWallClock))
                outcome = Self.redact(result, secrets: JSONValue.object(resolved).strings)
            } else {
                outcome = .permanent("no handler named '\(name)' is registered")
            }
            countDelegatedRun()
        } else {
            outcome = .permanent(p["error"]?.stringValue ?? "the server could not resolve the step's credentials")
        }
        engine.handlerFinished(key, outcome, now: syncClock, into: &effects)
        return .applied(started: nil)
    }

    static func redact(_ outcome: HandlerOutcome, secrets: Set<String>) -> HandlerOutcome {
        guard case .success(let output) = outcome else { return outcome }
        return .success(output.replacingStrings(in: secrets, with: "[redacted]"))
    }
}

enum CommandOutcome {
    case applied(started: String?)
    case refused(String)
    case deferred(String)
}


/// A batch of recorded telemetry ready for `POST /telemetry/mobile` (wire-notes §a):
/// `{"device": DeviceContext, "events": [{event_type, payload, timestamp}]}`, where
/// `payload` is JSON text of `{instance_id, block_id?, detail, environment?}`.
public struct TelemetryBatch: Equatable, Sendable {
    public var body: JSONValue
    public var count: Int
    /// The last event's id: what leaves the store once the server took the batch.
    public var throughID: Int64
}

extension SyncDriver {
    // MARK: Telemetry

    /// Events kept on the device at most; beyond it the oldest are dropped (a device
    /// offline for days must not fill its disk with its own diary).
    public static var telemetryKept: Int { 5_000 }
    /// Events per request: the server refuses more than 500 (413).
    public static var telemetryBatchSize: Int { 500 }

    /// The next batch to send, or nil with nothing recorded. Trims the store to
    /// `telemetryKept` first.
    public mutating func makeTelemetryBatch() throws -> TelemetryBatch? {
        let waiting = try store.telemetryCount()
        if waiting > Self.telemetryKept, let last = try store.telemetry(limit: waiting - Self.telemetryKept).last {
            try store.removeTelemetry(through: last.id)
        }
        let rows = try store.telemetry(limit: Self.telemetryBatchSize)
        guard let last = rows.last else { return nil }
        let environment = engine.config.environment
        let events: [JSONValue] = rows.map { row in
            var payload: [String: JSONValue] = ["instance_id": .string(row.event.instanceID.text), "detail": .string(row.event.detail)]
            if let block = row.event.blockID { payload["block_id"] = .string(block) }
            if !environment.isEmpty { payload["environment"] = .string(environment) }
            return ["event_type": .string(row.event.kind.rawValue), "payload": .string(JSONValue.object(payload).canonicalText),
                    "timestamp": .string(row.event.timestamp)]
        }
        let device = engine.deviceContext ?? DeviceContext(deviceID: syncClient?.config.deviceID ?? "", sdkVersion: engine.config.sdkVersion)
        return TelemetryBatch(body: ["device": device.json, "events": .array(events)], count: rows.count, throughID: last.id)
    }

    /// The server accepted `batch`: its events leave the store.
    public mutating func telemetryDelivered(_ batch: TelemetryBatch) throws {
        try store.removeTelemetry(through: batch.throughID)
    }
}
