import Orch8Wire
import LabKernel

extension SyncServer {
    // MARK: Credentials registry (secrets never leave in a response, except resolved into
    // a `step_result` for the device that asked)

    mutating func createCredential(_ request: HTTPRequestMessage, caller: Caller, now: Instant) throws -> HTTPResponseMessage {
        let f = try fields(request)
        let record: CredentialRecord
        do {
            let id = try f.optionalString("id") ?? newID()
            guard !id.isEmpty, id.utf8.count <= 128, id.allSatisfy({ $0.isLetter || $0.isNumber || "-_.".contains($0) }) else {
                throw APIError(400, "invalid argument", "id may hold letters, digits, - _ . (at most 128), got '\(id)'")
            }
            guard let value = f.optionalValue("value"), value.stringValue != nil || value.objectValue != nil else {
                throw APIError(400, "invalid argument", "value is required: a string, or an object of fields")
            }
            let expiresAt = try f.optionalString("expires_at")
            if let expiresAt, RFC3339.parse(expiresAt) == nil {
                throw APIError(400, "invalid argument", "expires_at is not an RFC 3339 time: '\(expiresAt)'")
            }
            record = CredentialRecord(id: id, tenantID: owner(caller), name: try f.name("name"), kind: try f.name("kind"), value: value,
                                      refreshToken: try f.optionalString("refresh_token"), enabled: try f.optionalBool("enabled") ?? true,
                                      expiresAt: expiresAt, createdAt: timestamp(now))
        } catch { throw APIError.from(error) }
        guard state.credential(tenant: record.tenantID, id: record.id) == nil else {
            throw APIError(409, "conflict", "credential \(record.id) already exists")
        }
        state.put(record)
        return .json(201, record.metadata)
    }

    func listCredentials(caller: Caller) -> HTTPResponseMessage {
        let items = state.credentials.values.filter { caller.sees($0.tenantID) }.sorted { ($0.tenantID, $0.id) < ($1.tenantID, $1.id) }
        return .json(200, ["items": .array(items.map(\.metadata)), "total": .number(Double(items.count))])
    }

    /// `PATCH /credentials/{id} {enabled?, value?, expires_at?}`.
    mutating func updateCredential(id: String, _ request: HTTPRequestMessage, caller: Caller) throws -> HTTPResponseMessage {
        guard var record = state.credentials.values.first(where: { $0.id == id && caller.sees($0.tenantID) }) else {
            throw APIError(404, "not found", "credential \(id) not found")
        }
        let f = try fields(request)
        do {
            if let enabled = try f.optionalBool("enabled") { record.enabled = enabled }
            if let value = f.optionalValue("value") {
                guard value.stringValue != nil || value.objectValue != nil else {
                    throw APIError(400, "invalid argument", "value must be a string or an object of fields")
                }
                record.value = value
            }
            if let expiresAt = try f.optionalString("expires_at") {
                guard RFC3339.parse(expiresAt) != nil else { throw APIError(400, "invalid argument", "expires_at is not an RFC 3339 time") }
                record.expiresAt = expiresAt
            }
        } catch { throw APIError.from(error) }
        state.put(record)
        return .json(200, record.metadata)
    }

    /// Resolves a delegation's `credentials://id[/field]` references into a `step_result`
    /// payload: the resolved params on success, `success: false` and the reason otherwise.
    func resolve(_ delegation: StepDelegation, tenant: String, now: Instant) -> JSONValue {
        var base: [String: JSONValue] = [
            "request_id": .string(delegation.requestID), "instance_id": .string(delegation.instanceID),
            "block_id": .string(delegation.blockID),
        ]
        do {
            let resolved = try resolveReferences(in: delegation.params, tenant: tenant, nowMs: unixMs(now))
            base["success"] = true
            base["handler"] = .string(delegation.handler)
            base["resolved_params"] = resolved
        } catch let error as APIError {
            base["success"] = false
            base["error"] = .string("credential resolution failed: \(error.message)")
        } catch {
            base["success"] = false
            base["error"] = .string("credential resolution failed")
        }
        return .object(base)
    }

    static let credentialScheme = "credentials://"

    func resolveReferences(in value: JSONValue, tenant: String, nowMs: Int64) throws -> JSONValue {
        switch value {
        case .string(let text) where text.hasPrefix(Self.credentialScheme):
            let reference = text.dropFirst(Self.credentialScheme.count)
            let parts = reference.split(separator: "/", maxSplits: 1).map(String.init)
            guard let id = parts.first, !id.isEmpty else { throw APIError(400, "invalid argument", "'\(text)' names no credential") }
            guard let credential = state.credential(tenant: tenant, id: id) else { throw APIError(404, "not found", "credential \(id) not found") }
            guard credential.enabled else { throw APIError(409, "conflict", "credential \(id) is disabled") }
            if let expires = credential.expiresAt.flatMap(RFC3339.parse), expires <= nowMs {
                throw APIError(409, "conflict", "credential \(id) expired at \(credential.expiresAt ?? "")")
            }
            var secret = credential.value
            if case .string(let raw) = secret, let parsed = try? JSONValue.parse(raw) { secret = parsed }
            guard parts.count == 2 else { return secret }
            guard let field = secret[parts[1]] else { throw APIError(404, "not found", "credential \(id) has no field \(parts[1])") }
            return field
        case .array(let items):
            return .array(try items.map { try resolveReferences(in: $0, tenant: tenant, nowMs: nowMs) })
        case .object(let fields):
            return .object(try fields.mapValues { try resolveReferences(in: $0, tenant: tenant, nowMs: nowMs) })
        case .null, .bool, .number, .string:
            return value
        }
    }

    // MARK: Telemetry

    /// `POST /telemetry/mobile {events, device?, tenant_id?}` → `{"accepted": n}`; more than
    /// 500 events is 413; each event needs a device at its level or the batch's.
    mutating func ingestTelemetry(_ request: HTTPRequestMessage, caller: Caller, now: Instant) throws -> HTTPResponseMessage {
        let f = try fields(request)
        var rows: [TelemetryRecord] = []
        do {
            let batchDevice = try f.optionalObject("device").map { try JSONFields(.object($0), path: "device").name("device_id") }
            let tenant = caller.isRoot ? (try f.optionalString("tenant_id") ?? caller.tenant) : caller.tenant
            rows = try f.array("events", limit: 500) { event, path throws(JSONFieldError) in
                let e = try JSONFields(event, path: path)
                var device: String?
                if let object = try e.optionalObject("device") { device = try JSONFields(.object(object), path: e.at("device")).name("device_id") }
                guard let deviceID = device ?? batchDevice else {
                    throw JSONFieldError(path: e.at("device"), message: "is required here or on the batch")
                }
                let payload: String
                switch e.optionalValue("payload") {
                case .string(let text)?: payload = text
                case let other?: payload = other.canonicalText
                case nil: payload = ""
                }
                return TelemetryRecord(tenantID: tenant, deviceID: deviceID, eventType: try e.name("event_type"), payload: payload,
                                       timestamp: try e.name("timestamp"), receivedAtMs: unixMs(now))
            }
        } catch let error as JSONFieldError {
            if error.tooLarge { throw APIError(413, "payload too large", "at most 500 events per batch") }
            throw APIError(field: error)
        }
        for row in rows { try requireOwnDevice(row.deviceID, tenant: row.tenantID) }
        if !rows.isEmpty { state.add(rows) }
        return .json(200, ["accepted": .number(Double(rows.count))])
    }

    /// `POST /telemetry/mobile/errors`: one error report, kept as a telemetry row.
    mutating func ingestErrorReport(_ request: HTTPRequestMessage, caller: Caller, now: Instant) throws -> HTTPResponseMessage {
        let f = try fields(request)
        do {
            let device = try JSONFields(f.optionalValue("device") ?? .null, path: "device").name("device_id")
            let report: JSONValue = [
                "message": .string(try f.name("message")), "stack_trace": f.optionalValue("stack_trace") ?? .null,
                "instance_id": f.optionalValue("instance_id") ?? .null, "sequence_name": f.optionalValue("sequence_name") ?? .null,
            ]
            try requireOwnDevice(device, tenant: caller.tenant)
            state.add([TelemetryRecord(tenantID: caller.tenant, deviceID: device, eventType: "error:" + (try f.name("error_type")),
                                       payload: report.canonicalText, timestamp: timestamp(now), receivedAtMs: unixMs(now))])
        } catch { throw APIError.from(error) }
        return .json(202, ["accepted": 1])
    }

    /// Telemetry about a device registered to another tenant is refused as if the device
    /// did not exist; a device not registered at all may report (the SDK sends telemetry
    /// before its first registration succeeds).
    func requireOwnDevice(_ device: String, tenant: String) throws {
        if let record = state.devices[device], !tenant.isEmpty, record.tenantID != tenant {
            throw APIError(404, "not found", "device \(device) not found")
        }
    }

    /// `GET /api/v1/mobile/devices/{id}/telemetry?limit=`: the device's most recent events
    /// (the server keeps the last 200 per device in memory; older ones stay in the
    /// database until retention), newest first.
    func listTelemetry(device: String, _ request: HTTPRequestMessage, caller: Caller) throws -> HTTPResponseMessage {
        if let record = state.devices[device], !caller.sees(record.tenantID) { throw APIError(404, "not found", "device \(device) not found") }
        let rows = (state.recentTelemetry[device] ?? []).filter { caller.sees($0.tenantID) }
        let items = rows.reversed().prefix(try limit(request, default: 50, max: SyncServerState.recentTelemetryPerDevice)).map(\.json)
        return .json(200, ["items": .array(Array(items)), "total": .number(Double(rows.count))])
    }
}
