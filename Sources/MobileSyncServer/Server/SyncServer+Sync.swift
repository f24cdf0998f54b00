public import Orch8Wire
public import LabKernel

extension SyncServer {
    /// `POST /mobile/sync`: takes the device's batch, answers with its pending commands.
    ///
    /// Everything in the request is validated before anything is written, so a bad item
    /// leaves the state as it was. Statuses are coalesced per (device, instance), an older
    /// report never replacing a newer one; approvals are one per (device, instance,
    /// block); each delegation becomes a `step_result` command once per request id;
    /// acknowledged commands are never sent again.
    mutating func sync(_ request: HTTPRequestMessage, caller: Caller, now: Instant) throws -> HTTPResponseMessage {
        let sync: SyncRequest
        do {
            sync = try SyncRequest(json: try body(request))
        } catch let error as JSONFieldError {
            if error.tooLarge { throw APIError(400, "invalid argument", "sync arrays must each contain at most 500 items") }
            throw APIError(field: error)
        }
        if let header = request.header("x-device-id"), !header.isEmpty, header != sync.deviceID {
            throw APIError(400, "invalid argument", "the x-device-id header (\(header)) does not match device_id (\(sync.deviceID))")
        }
        return .json(200, try apply(sync, caller: caller, now: now).response.json)
    }

    /// The typed sync, for drivers that carry requests as values (the simulator).
    public mutating func sync(_ sync: SyncRequest, tenant: String, now: Instant) throws(SyncServerRefusal) -> SyncOutcome {
        _ = state.takeChanges()
        pruneIfDue(now: now)  // as `handle` does: a simulated server keeps no more than the real one
        do {
            var outcome = try apply(sync, caller: Caller(tenant: tenant, isRoot: tenant.isEmpty), now: now)
            outcome.changes = state.takeChanges()
            return outcome
        } catch let error as APIError {
            throw SyncServerRefusal(status: error.status, message: "\(error.kind): \(error.message)")
        } catch {
            throw SyncServerRefusal(status: 500, message: "internal server error")
        }
    }

    mutating func apply(_ sync: SyncRequest, caller: Caller, now: Instant) throws -> SyncOutcome {
        let device = state.devices[sync.deviceID]
        if let device, !caller.sees(device.tenantID) { throw APIError(404, "not found", "device \(sync.deviceID) not found") }
        if device == nil && !caller.tenant.isEmpty { throw APIError(404, "not found", "device \(sync.deviceID) not found") }
        let tenant = device?.tenantID ?? caller.tenant
        // The registered record's copy of the id, which every row of this device then shares.
        let deviceID = device?.deviceID ?? sync.deviceID

        var reported: [Int64] = []
        for (index, status) in sync.statusUpdates.enumerated() {
            try requireUUID(status.instanceID, "status_updates[\(index)].instance_id")
            guard let ms = RFC3339.parse(status.timestamp) else {
                throw APIError(400, "invalid argument", "status_updates[\(index)].timestamp is not an RFC 3339 time: '\(status.timestamp)'")
            }
            reported.append(ms)
        }
        for (index, approval) in sync.approvalRequests.enumerated() {
            try requireUUID(approval.instanceID, "approval_requests[\(index)].instance_id")
        }
        for (index, delegation) in sync.stepDelegations.enumerated() {
            try requireUUID(delegation.instanceID, "step_delegations[\(index)].instance_id")
        }

        let stamp = unixMs(now)
        for (status, ms) in zip(sync.statusUpdates, reported) {
            let existing = state.status(device: sync.deviceID, instance: status.instanceID)
            if let existing, existing.reportedAtMs > ms { continue }
            // The stored row's copy of the id, which the table's key, the listing and the
            // instance's approvals share (each report's own copy was kept beside the key).
            state.put(StatusRecord(
                deviceID: deviceID, tenantID: tenant, instanceID: existing?.instanceID ?? status.instanceID,
                sequenceName: state.shared(status.sequenceName),
                state: state.shared(status.state), currentStep: state.shared(status.currentStep), handler: state.shared(status.handler),
                contextSummary: config.keepsStatusTexts ? status.contextSummary?.canonicalText : nil,
                steps: config.keepsStatusTexts ? status.steps?.canonicalText : nil, updatedAtMs: stamp,
                reportedAtMs: ms))
        }
        var created: [ApprovalRecord] = []
        for approval in sync.approvalRequests where state.approval(device: sync.deviceID, instance: approval.instanceID, block: approval.blockID) == nil {
            let step = ApprovalStep(blockID: approval.blockID, sequenceName: approval.sequenceName, prompt: approval.prompt,
                                    choices: approval.choices?.canonicalText, storeAs: approval.storeAs, timeoutSecs: approval.timeoutSeconds,
                                    metadata: approval.metadata?.canonicalText)
            let instanceID = state.statuses[sync.deviceID]?[approval.instanceID]?.instanceID ?? approval.instanceID
            created.append(ApprovalRecord(id: newID(), deviceID: deviceID, tenantID: tenant, instanceID: instanceID, step: state.shared(step),
                                          state: .pending, resolution: nil, createdAtMs: stamp, resolvedAtMs: nil))
            state.put(created[created.count - 1])
        }
        for delegation in sync.stepDelegations {
            let seen = "delegation|\(sync.deviceID)|\(delegation.requestID)"
            guard state.meta[seen] == nil else { continue }
            let command = enqueue(.stepResult, payload: resolve(delegation, tenant: tenant, now: now), device: sync.deviceID,
                                  tenant: tenant, now: now)
            state.setMeta(seen, command.id)
        }
        for id in sync.commandAcks {
            guard var command = state.commands[id], command.deviceID == sync.deviceID, command.ackedAtMs == nil else { continue }
            command.ackedAtMs = stamp
            state.put(command)
        }
        if var device {
            device.lastSyncAtMs = stamp
            state.put(device)
        }
        let pending = state.pendingCommands(device: sync.deviceID, limit: config.commandBatch)
        let response = SyncResponse(
            commands: pending.map { SyncCommand(id: $0.id, type: $0.type, payload: $0.payload) },
            syncIntervalSecs: pending.isEmpty ? config.idleIntervalSecs : config.activeIntervalSecs)
        return SyncOutcome(response: response, newApprovals: created, changes: [])
    }

    /// Registers a device for a tenant (the typed `POST /mobile/devices/register`).
    public mutating func register(device: String, platform: String, pushToken: String?, tenant: String, now: Instant) {
        state.put(DeviceRecord(deviceID: device, tenantID: tenant, pushToken: pushToken, platform: platform, appVersion: nil,
                               active: true, lastSyncAtMs: nil, registeredAtMs: unixMs(now)))
        _ = state.takeChanges()
    }

    func requireUUID(_ text: String, _ field: String) throws {
        guard UUIDText.isValid(text) else { throw APIError(400, "invalid argument", "\(field) is not a UUID: '\(text)'") }
    }

    /// Queues a command for a device.
    @discardableResult
    mutating func enqueue(_ type: SyncCommandType, payload: JSONValue, device: String, tenant: String, now: Instant) -> CommandRecord {
        let command = CommandRecord(id: newID(), sequence: state.nextCommandSequence, deviceID: device, tenantID: tenant,
                                    type: type.rawValue, payload: payload, createdAtMs: unixMs(now), ackedAtMs: nil)
        state.put(command)
        return command
    }

    // MARK: Devices

    /// `POST /mobile/devices/register`: 201 with an empty body, as the real server.
    mutating func registerDevice(_ request: HTTPRequestMessage, caller: Caller, now: Instant) throws -> HTTPResponseMessage {
        let f = try fields(request)
        let id: String, platform: String, pushToken: String?, appVersion: String?
        do {
            id = try f.name("device_id")
            platform = try f.name("platform")
            pushToken = try f.optionalString("push_token")
            appVersion = try f.optionalString("app_version")
        } catch { throw APIError.from(error) }
        guard id.utf8.count <= 256 else { throw APIError(400, "invalid argument", "device_id is longer than 256 bytes") }
        let tenant = owner(caller)
        if let existing = state.devices[id], existing.tenantID != tenant {
            throw APIError(409, "conflict", "device \(id) is already registered to another tenant")
        }
        let registeredAt = state.devices[id]?.registeredAtMs ?? unixMs(now)
        state.put(DeviceRecord(deviceID: id, tenantID: tenant, pushToken: pushToken, platform: platform, appVersion: appVersion,
                               active: true, lastSyncAtMs: state.devices[id]?.lastSyncAtMs, registeredAtMs: registeredAt))
        return .empty(201)
    }

    func listDevices(_ request: HTTPRequestMessage, caller: Caller) throws -> HTTPResponseMessage {
        let tenant = scope(request, caller)
        let items = state.deviceOrder.page(tenant: tenant, limit: try limit(request)).compactMap { state.devices[$0]?.json }
        return .json(200, ["items": .array(items), "total": .number(Double(state.deviceOrder.count(tenant: tenant)))])
    }

    /// `GET /mobile/status?device_id=`: newest first.
    func listStatuses(_ request: HTTPRequestMessage, caller: Caller) throws -> HTTPResponseMessage {
        let count = try limit(request)
        switch listing(request, caller) {
        case .hidden:
            throw APIError(404, "not found", "device \(request.query["device_id"] ?? "") not found")
        case .device(let device):
            let rows = state.statuses(device: device).sorted { $0.orderKey > $1.orderKey }
            return .json(200, ["items": .array(rows.prefix(count).map(\.json)), "total": .number(Double(rows.count))])
        case .list(let tenant):
            let page = state.newestStatuses(count, tenant: tenant)
            return .json(200, ["items": .array(page.rows.map(\.json)), "total": .number(Double(page.total))])
        }
    }

    /// The tenant a listing is limited to: the caller's, or for the root key the
    /// `tenant_id` query parameter if given (nil: every tenant).
    func scope(_ request: HTTPRequestMessage, _ caller: Caller) -> String? {
        if !caller.tenant.isEmpty { return caller.tenant }
        return request.query["tenant_id"].flatMap { $0.isEmpty ? nil : $0 }
    }
}
