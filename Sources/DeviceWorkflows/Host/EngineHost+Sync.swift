public import LabKernel

/// The device side of orch8 sync on top of the host: the outbox is filled as the engine's
/// effects are applied (in their transaction), requests are built from it, and the
/// server's commands are applied exactly once.
///
/// Exactly once: a command's executed marker is written in the same transaction as the
/// instance changes it causes, before anything else happens; a command already marked is
/// only acknowledged again. A failure that may pass (the sequence is not loaded yet, an
/// engine limit) rolls the marker back and leaves the command unacknowledged, so the
/// server sends it again. Anything that can never apply (an unknown instance, a value
/// outside the step's choices, an unknown command type) is marked and acknowledged.
extension EngineHost {
    public static var credentialScheme: String { "credentials://" }

    public mutating func enableSync(deviceID: String, seed: StreamSeed) {
        sync = SyncReporter(config: SyncReporter.Config(deviceID: deviceID), seed: seed)
    }

    /// `onPushReceived()`: the next tick syncs.
    public mutating func pushReceived() { sync?.forceSync() }

    // MARK: Filling the outbox

    mutating func queueStatus(_ instanceID: String) throws {
        guard let status = engine.statusUpdate(of: instanceID, now: now) else { return }
        try store.enqueue(.status, key: instanceID, payload: status.json)
    }

    mutating func queueApproval(_ instanceID: String, step: String) throws {
        guard let approval = engine.approvalRequest(instanceID: instanceID, step: step) else { return }
        try openBatch()
        try store.enqueue(.approval, key: approval.key, payload: approval.json)
    }

    static func delegates(_ invocation: HandlerInvocation) -> Bool {
        JSONValue.object(invocation.params).containsString(prefix: credentialScheme)
    }

    /// A step whose params name secrets: the server resolves them and answers with a
    /// `step_result`; the handler runs then, with the secrets held in memory only.
    mutating func queueDelegation(_ invocation: HandlerInvocation) throws {
        let requestID = "\(invocation.instanceID):\(invocation.blockID):\(invocation.key.attempt)"
        let delegation = StepDelegation(requestID: requestID, instanceID: invocation.instanceID, blockID: invocation.blockID,
                                        handler: invocation.handler, params: .object(invocation.params))
        try openBatch()
        try store.enqueue(.delegation, key: delegation.key, payload: delegation.json)
        try store.setSyncValue("delegation:" + requestID, "\(invocation.key.instance)/\(invocation.key.node)/\(invocation.key.attempt)")
        engine.holdForDelegation(invocation.key)
    }

    mutating func openBatch() throws {
        if !inTransaction {
            try store.begin()
            inTransaction = true
        }
    }

    // MARK: Requests

    /// The request to send now: up to 100 statuses, 50 approvals, 20 delegations and 100
    /// acknowledgements, oldest first.
    public func makeSyncRequest() throws -> (request: SyncRequest, sent: SentBatch) {
        let config = sync?.config ?? SyncReporter.Config(deviceID: "")
        let statuses = try store.outbox(.status, limit: config.statusBatch)
        let approvals = try store.outbox(.approval, limit: config.approvalBatch)
        let delegations = try store.outbox(.delegation, limit: config.delegationBatch)
        let acks = try store.pendingAcks(limit: config.ackBatch)
        let request = SyncRequest(
            deviceID: config.deviceID,
            statusUpdates: statuses.compactMap { try? StatusUpdate(json: $0.payload) },
            approvalRequests: approvals.compactMap { try? ApprovalRequest(json: $0.payload) },
            stepDelegations: delegations.compactMap { try? StepDelegation(json: $0.payload) },
            commandAcks: acks)
        return (request, SentBatch(entries: statuses + approvals + delegations, acks: acks))
    }

    /// Starts a sync if one is due at tick number `tick`; the caller sends the request and
    /// reports back with `syncSucceeded` or `syncFailed`.
    public mutating func syncIfDue(tick: UInt64) throws -> (request: SyncRequest, sent: SentBatch)? {
        guard let reporter = sync, reporter.isDue(tick: tick, now: now) else { return nil }
        let made = try makeSyncRequest()
        sync?.began()
        return made
    }

    /// The server answered 2xx: the carried entries leave the outbox, the acks are done,
    /// and its commands are applied.
    @discardableResult
    public mutating func syncSucceeded(_ sent: SentBatch, response: SyncResponse, tick: UInt64) throws -> CommandReport {
        try openBatch()
        try store.removeSent(sent.entries)
        try store.acknowledged(sent.acks)
        try commitIfNeeded()
        var report = CommandReport()
        for command in response.commands { try execute(command, report: &report) }
        sync?.succeeded(intervalHint: response.syncIntervalSecs, tick: tick, baseTickMs: engine.config.tickIntervalMs)
        try store.pruneExecuted(before: now - .days(30))
        return report
    }

    /// The request failed (no network, 5xx, 429): nothing is lost; back off.
    @discardableResult
    public mutating func syncFailed(retryAfter: TimeSpan? = nil) -> Instant? {
        let at = now
        return sync?.failed(now: at, retryAfter: retryAfter)
    }

    // MARK: Commands

    public struct CommandReport: Equatable, Sendable {
        public var applied: [String] = []
        public var duplicates: [String] = []
        /// Refused for good (acknowledged anyway), with why.
        public var refused: [(id: String, reason: String)] = []
        /// Left for the server to send again, with why.
        public var deferred: [(id: String, reason: String)] = []

        public static func == (a: CommandReport, b: CommandReport) -> Bool {
            a.applied == b.applied && a.duplicates == b.duplicates && a.refused.map(\.id) == b.refused.map(\.id)
                && a.deferred.map(\.id) == b.deferred.map(\.id)
        }
    }

    enum CommandOutcome {
        case applied
        case refused(String)
        case deferred(String)
    }

    mutating func execute(_ command: SyncCommand, report: inout CommandReport) throws {
        if try store.isExecuted(command.id) {
            try store.reacknowledge(command.id)
            report.duplicates.append(command.id)
            return
        }
        try openBatch()
        try store.markExecuted(command.id, at: now)
        var effects: [EngineEffect] = []
        let outcome = run(command, into: &effects)
        if case .deferred(let reason) = outcome {
            store.rollback()
            inTransaction = false
            report.deferred.append((command.id, reason))
            return
        }
        try apply(&effects)
        try commitIfNeeded()
        switch outcome {
        case .applied: report.applied.append(command.id)
        case .refused(let reason): report.refused.append((command.id, reason))
        case .deferred: break
        }
    }

    mutating func run(_ command: SyncCommand, into effects: inout [EngineEffect]) -> CommandOutcome {
        let p = command.payload
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
                try engine.start(name, input: p["input"] ?? [:], dedupKey: p["dedup_key"]?.stringValue, now: now, into: &effects)
            case .updateSequence:
                guard let id = p["instance_id"]?.stringValue else { return .refused("update_sequence needs instance_id") }
                guard let policy = UpdatePolicy(rawValue: p["policy"]?.stringValue ?? "restart") else {
                    return .refused("unknown update policy \(p["policy"]?.stringValue ?? "")")
                }
                try engine.updateInstance(id, policy: policy, sequenceName: p["sequence_name"]?.stringValue, input: p["input"],
                                          now: now, into: &effects)
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
        return .applied
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
            let invocation = HandlerInvocation(key: key, instanceID: p["instance_id"]?.stringValue ?? "", sequenceName: "",
                                               blockID: p["block_id"]?.stringValue ?? "", handler: name, params: resolved, data: [:])
            if let handler = handlers[name] {
                let result = handler(HandlerCall(invocation: invocation, now: now, wallClock: wallClock))
                outcome = Self.redact(result, secrets: JSONValue.object(resolved).strings)
            } else {
                outcome = .permanent("no handler named '\(name)' is registered")
            }
            handlerRunCount += 1
        } else {
            outcome = .permanent(p["error"]?.stringValue ?? "the server could not resolve the step's credentials")
        }
        engine.handlerFinished(key, outcome, now: now, into: &effects)
        return .applied
    }

    static func redact(_ outcome: HandlerOutcome, secrets: Set<String>) -> HandlerOutcome {
        guard case .success(let output) = outcome else { return outcome }
        return .success(output.replacingStrings(in: secrets, with: "[redacted]"))
    }
}

extension JSONValue {
    /// Whether any string in the value starts with `prefix`.
    func containsString(prefix: String) -> Bool {
        switch self {
        case .string(let s): return s.hasPrefix(prefix)
        case .array(let items): return items.contains { $0.containsString(prefix: prefix) }
        case .object(let fields): return fields.values.contains { $0.containsString(prefix: prefix) }
        case .null, .bool, .number: return false
        }
    }

    /// Every string in the value (keys excluded).
    var strings: Set<String> {
        switch self {
        case .string(let s): return [s]
        case .array(let items): return items.reduce(into: Set<String>()) { $0.formUnion($1.strings) }
        case .object(let fields): return fields.values.reduce(into: Set<String>()) { $0.formUnion($1.strings) }
        case .null, .bool, .number: return []
        }
    }

    func replacingStrings(in set: Set<String>, with replacement: String) -> JSONValue {
        switch self {
        case .string(let s): return set.contains(s) ? .string(replacement) : self
        case .array(let items): return .array(items.map { $0.replacingStrings(in: set, with: replacement) })
        case .object(let fields): return .object(fields.mapValues { $0.replacingStrings(in: set, with: replacement) })
        case .null, .bool, .number: return self
        }
    }
}
