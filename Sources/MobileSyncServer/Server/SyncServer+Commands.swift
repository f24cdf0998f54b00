public import Orch8Wire
public import LabKernel

extension SyncServer {
    // MARK: Approvals

    /// `GET /mobile/approvals?state=pending&device_id=&limit=`, oldest first. Pending
    /// approvals whose `timeout_secs` has passed are marked expired first.
    mutating func listApprovals(_ request: HTTPRequestMessage, caller: Caller, now: Instant) throws -> HTTPResponseMessage {
        let wanted = try request.query["state"].map { text -> ApprovalRecord.State in
            guard let state = ApprovalRecord.State(rawValue: text) else {
                throw APIError(400, "invalid argument", "state is pending, resolved or expired, got '\(text)'")
            }
            return state
        }
        let count = try limit(request)
        expireApprovals(now: now)
        switch listing(request, caller) {
        case .hidden:
            return .json(200, ["items": [], "total": 0])
        case .device(let device):
            let rows = state.approvals(device: device).filter { wanted == nil || $0.state == wanted }.sorted { $0.orderKey < $1.orderKey }
            return .json(200, ["items": .array(rows.prefix(count).map(\.json)), "total": .number(Double(rows.count))])
        case .list(let tenant):
            let page = state.oldestApprovals(count, tenant: tenant, state: wanted)
            return .json(200, ["items": .array(page.rows.map(\.json)), "total": .number(Double(page.total))])
        }
    }

    /// What a listing reads.
    enum Listing {
        /// A device of a tenant the caller does not see: an empty page.
        case hidden
        /// One device's rows (`device_id`), sorted when asked: a device has few.
        case device(String)
        /// A list kept in order (`OrderedIndex`): the caller's tenant's, or for the root
        /// key `tenant_id`'s or (nil) everyone's.
        case list(tenant: String?)
    }

    func listing(_ request: HTTPRequestMessage, _ caller: Caller) -> Listing {
        let tenant = scope(request, caller)
        if let device = request.query["device_id"], !device.isEmpty {
            if let record = state.devices[device], let tenant, record.tenantID != tenant { return .hidden }
            return .device(device)
        }
        return .list(tenant: tenant)
    }

    /// Marks pending approvals whose timeout has passed as expired: the earliest
    /// deadlines first, stopping at the first still ahead.
    mutating func expireApprovals(now: Instant) {
        let nowMs = unixMs(now)
        while let next = state.expiryOrder.first, next.deadlineMs <= nowMs {
            guard var approval = state.approvals[next.id], approval.state == .pending else {
                state.expiryOrder.remove(next)
                continue
            }
            approval.state = .expired
            state.put(approval)
        }
    }

    /// The typed resolve, for an operator model: returns the command and its push.
    public mutating func resolve(approval id: String, value: String, now: Instant) throws(SyncServerRefusal) -> (command: CommandRecord, push: PushWake?) {
        guard var approval = state.approvals[id], approval.state == .pending else {
            throw SyncServerRefusal(status: 404, message: "not found: approval \(id) not found or already resolved")
        }
        guard approval.allowedValues.contains(value) else {
            throw SyncServerRefusal(status: 400, message: "invalid argument: '\(value)' is not a choice of \(approval.blockID)")
        }
        let settled = settle(&approval, output: ["value": .string(value)], now: now)
        _ = state.takeChanges()
        return settled
    }

    /// Marks an approval resolved and queues its `complete_step` (with a push, if any).
    mutating func settle(_ approval: inout ApprovalRecord, output: JSONValue, now: Instant) -> (command: CommandRecord, push: PushWake?) {
        approval.state = .resolved
        approval.resolution = state.shared(output.canonicalText)
        approval.resolvedAtMs = unixMs(now)
        state.put(approval)
        let command = enqueue(.completeStep, payload: [
            "instance_id": .string(approval.instanceID), "block_id": .string(approval.blockID),
            "step_name": .string(approval.blockID), "output": output,
        ], device: approval.deviceID, tenant: approval.tenantID, now: now)
        return (command, wake(for: command, now: now))
    }

    /// The typed `POST /mobile/commands`, for a campaign model.
    public mutating func command(_ type: SyncCommandType, payload: JSONValue, device: String, now: Instant) -> (command: CommandRecord, push: PushWake?) {
        let tenant = state.devices[device]?.tenantID ?? ""
        let command = enqueue(type, payload: payload, device: device, tenant: tenant, now: now)
        let push = wake(for: command, now: now)
        _ = state.takeChanges()
        return (command, push)
    }

    /// `POST /mobile/approvals/{id}/resolve {output}`: queues `complete_step` and a push.
    /// Unlike the real server, an output whose value is not one of the step's choices is
    /// refused here (400) instead of being delivered and ignored by the device.
    mutating func resolveApproval(id: String, _ request: HTTPRequestMessage, caller: Caller, now: Instant,
                                  pushes: inout [PushWake]) throws -> HTTPResponseMessage {
        try requireUUID(id, "the approval id")
        expireApprovals(now: now)
        guard var approval = state.approvals[id], caller.sees(approval.tenantID), approval.state == .pending else {
            throw APIError(404, "not found", "approval \(id) not found or already resolved")
        }
        let f = try fields(request)
        guard let output = f.optionalValue("output") else { throw APIError(400, "invalid argument", "output is required") }
        let value: String
        switch output {
        case .string(let text): value = text
        case .object(let fields):
            guard let text = fields["value"]?.stringValue else {
                throw APIError(400, "invalid argument", "output must be {\"value\": \"<choice>\"} or a choice string")
            }
            value = text
        default:
            throw APIError(400, "invalid argument", "output must be {\"value\": \"<choice>\"} or a choice string, found \(output.kindName)")
        }
        let allowed = approval.allowedValues
        guard allowed.contains(value) else {
            throw APIError(400, "invalid argument", "'\(value)' is not a choice of \(approval.blockID); its choices: \(allowed.joined(separator: ", "))")
        }
        let normalized: JSONValue = output.stringValue != nil ? ["value": .string(value)] : output
        if let push = settle(&approval, output: normalized, now: now).push { pushes.append(push) }
        return .empty(200)
    }

    // MARK: Commands

    /// `POST /mobile/commands {device_id, command_type, payload}` → 201 `{"id": …}` (the
    /// real server answers with an empty body; the id is an addition clients may ignore).
    mutating func createCommand(_ request: HTTPRequestMessage, caller: Caller, now: Instant,
                                pushes: inout [PushWake]) throws -> HTTPResponseMessage {
        let f = try fields(request)
        let deviceID: String, typeName: String, payload: JSONValue
        do {
            deviceID = try f.name("device_id")
            typeName = try f.name("command_type")
            payload = f.optionalValue("payload") ?? [:]
        } catch { throw APIError.from(error) }
        guard let type = SyncCommandType(rawValue: typeName) else {
            throw APIError(400, "invalid argument", "unknown command type '\(typeName)'; expected one of: "
                + SyncCommandType.allCases.map(\.rawValue).joined(separator: ", "))
        }
        try validate(payload, of: type)
        guard let device = state.devices[deviceID], caller.sees(device.tenantID) else {
            throw APIError(404, "not found", "device \(deviceID) not found")
        }
        let command = enqueue(type, payload: payload, device: deviceID, tenant: device.tenantID, now: now)
        if let push = wake(for: command, now: now) { pushes.append(push) }
        return .json(201, ["id": .string(command.id)])
    }

    /// Each command type's payload, as `sync_reporter.rs::execute_command` reads it.
    func validate(_ payload: JSONValue, of type: SyncCommandType) throws {
        let p: JSONFields
        do { p = try JSONFields(payload, path: "payload") } catch { throw APIError.from(error) }
        do {
            switch type {
            case .completeStep:
                try requireUUID(try p.string("instance_id"), "payload.instance_id")
                if try p.optionalString("step_name") == nil { _ = try p.name("block_id") }
            case .cancelInstance:
                try requireUUID(try p.string("instance_id"), "payload.instance_id")
            case .startWorkflow:
                _ = try p.name("sequence_name")
                _ = try p.optionalObject("input")
                _ = try p.optionalString("dedup_key")
            case .updateSequence:
                try requireUUID(try p.string("instance_id"), "payload.instance_id")
                if let policy = try p.optionalString("policy"), UpdatePolicy(rawValue: policy) == nil {
                    throw APIError(400, "invalid argument", "payload.policy '\(policy)' is not one of: "
                        + UpdatePolicy.allCases.map(\.rawValue).joined(separator: ", "))
                }
                _ = try p.optionalString("sequence_name")
                _ = try p.optionalObject("input")
            case .stepResult:
                _ = try p.name("request_id")
                try requireUUID(try p.string("instance_id"), "payload.instance_id")
                _ = try p.name("block_id")
                guard try p.optionalBool("success") != nil else { throw JSONFieldError(path: p.at("success"), message: "is required") }
            }
        } catch { throw APIError.from(error) }
    }

    /// `GET /api/v1/mobile/push/stream?device_id=`: the development push channel
    /// (docs/sync.md, "Push wake on loopback"). APNs and FCM cannot be reached from here,
    /// so a device on the same machine subscribes with its tenant's key; the core checks
    /// the caller and the device and names the channel (`X-Push-Device`), and the live
    /// driver keeps the response open as Server-Sent Events, one `wake` event per new
    /// command for that device.
    func openPushStream(_ request: HTTPRequestMessage, caller: Caller) throws -> HTTPResponseMessage {
        guard let device = request.query["device_id"], !device.isEmpty else {
            throw APIError(400, "invalid argument", "device_id is required")
        }
        guard let record = state.devices[device], caller.sees(record.tenantID) else {
            throw APIError(404, "not found", "device \(device) not found (register it first)")
        }
        return HTTPResponseMessage(status: 200, headers: [
            HTTPHeader("Content-Type", "text/event-stream"), HTTPHeader("Cache-Control", "no-store"),
            HTTPHeader(Self.pushStreamHeader, device),
        ], body: Array(": subscribed\n\n".utf8))
    }

    /// Names the device of an accepted push stream.
    public static let pushStreamHeader = "X-Push-Device"

    /// The silent push for a new command, when the device gave a push token.
    mutating func wake(for command: CommandRecord, now: Instant) -> PushWake? {
        guard let token = state.devices[command.deviceID]?.pushToken, !token.isEmpty else { return nil }
        var metadata: [String: JSONValue] = [
            "schema_version": 1, "tenant_id": .string(command.tenantID), "device_id": .string(command.deviceID),
            "command_id": .string(command.id), "nonce": .string(newID()), "issued_at": .string(timestamp(now)),
            "expires_at": .string(timestamp(now + .minutes(5))),
        ]
        if let signed = signWithCurrentKey(Array(JSONValue.object(metadata).canonicalText.utf8)) {
            metadata["key_id"] = .string(signed.keyID)
            metadata["signature"] = .string(signed.signature)
        }
        return PushWake(deviceID: command.deviceID, pushToken: token, commandID: command.id, metadata: .object(metadata))
    }
}
