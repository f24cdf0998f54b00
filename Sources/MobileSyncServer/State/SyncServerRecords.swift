public import LabKernel

// The rows of the orch8 mobile sync server (wire-notes §a, `orch8-storage` records).
// The times the server stamps are kept as Unix milliseconds and shown as the RFC 3339
// text the API answers with (`RFC3339.format`, the server's one format): a day of a large
// fleet stamps five rows per workflow, and each text was a heap string of its own.

public struct DeviceRecord: Equatable, Sendable {
    public var deviceID: String
    public var tenantID: String
    public var pushToken: String?
    public var platform: String
    public var appVersion: String?
    public var active: Bool
    public var lastSyncAtMs: Int64?
    public var registeredAtMs: Int64

    public var lastSyncAt: String? { lastSyncAtMs.map(RFC3339.format(unixMilliseconds:)) }
    public var registeredAt: String { RFC3339.format(unixMilliseconds: registeredAtMs) }

    public var json: JSONValue {
        ["device_id": .string(deviceID), "tenant_id": .string(tenantID), "push_token": pushToken.map(JSONValue.string) ?? .null,
         "platform": .string(platform), "app_version": appVersion.map(JSONValue.string) ?? .null, "active": .bool(active),
         "last_sync_at": lastSyncAt.map(JSONValue.string) ?? .null, "registered_at": .string(registeredAt)]
    }

    package init(deviceID: String, tenantID: String, pushToken: String?, platform: String, appVersion: String?, active: Bool, lastSyncAtMs: Int64?, registeredAtMs: Int64) {
        self.deviceID = deviceID
        self.tenantID = tenantID
        self.pushToken = pushToken
        self.platform = platform
        self.appVersion = appVersion
        self.active = active
        self.lastSyncAtMs = lastSyncAtMs
        self.registeredAtMs = registeredAtMs
    }
}

public struct StatusRecord: Equatable, Sendable {
    public var deviceID: String
    public var tenantID: String
    public var instanceID: String
    public var sequenceName: String?
    public var state: String
    public var currentStep: String?
    public var handler: String?
    /// JSON text, as the real API returns it.
    public var contextSummary: String?
    /// The step timeline as JSON text.
    public var steps: String?
    /// When the server stored it.
    public var updatedAtMs: Int64
    /// The device's timestamp of this status, so an older one arriving late does not win.
    public var reportedAtMs: Int64

    public var updatedAt: String { RFC3339.format(unixMilliseconds: updatedAtMs) }

    var orderKey: StatusKey { StatusKey(reportedAtMs: reportedAtMs, instanceID: instanceID, deviceID: deviceID) }

    public var json: JSONValue {
        ["device_id": .string(deviceID), "instance_id": .string(instanceID), "sequence_name": sequenceName.map(JSONValue.string) ?? .null,
         "state": .string(state), "current_step": currentStep.map(JSONValue.string) ?? .null,
         "handler": handler.map(JSONValue.string) ?? .null, "context_summary": contextSummary.map(JSONValue.string) ?? .null,
         "steps": steps.map(JSONValue.string) ?? .null, "updated_at": .string(updatedAt)]
    }

    package init(deviceID: String, tenantID: String, instanceID: String, sequenceName: String?, state: String, currentStep: String?, handler: String?, contextSummary: String?, steps: String?, updatedAtMs: Int64, reportedAtMs: Int64) {
        self.deviceID = deviceID
        self.tenantID = tenantID
        self.instanceID = instanceID
        self.sequenceName = sequenceName
        self.state = state
        self.currentStep = currentStep
        self.handler = handler
        self.contextSummary = contextSummary
        self.steps = steps
        self.updatedAtMs = updatedAtMs
        self.reportedAtMs = reportedAtMs
    }
}

public struct ApprovalRecord: Equatable, Sendable {
    public enum State: String, Sendable { case pending, resolved, expired }

    public var id: String
    public var deviceID: String
    public var tenantID: String
    public var instanceID: String
    /// What every approval of its workflow step repeats, shared with them
    /// (`SyncServerState.shared`).
    public let step: ApprovalStep
    public var state: State
    /// JSON text of the output it was resolved with.
    public var resolution: String?
    public var createdAtMs: Int64
    public var resolvedAtMs: Int64?

    public var blockID: String { step.blockID }
    public var sequenceName: String? { step.sequenceName }
    public var prompt: String? { step.prompt }
    /// JSON text of `[{label, value}]`, as the real API returns it.
    public var choices: String? { step.choices }
    public var storeAs: String? { step.storeAs }
    public var timeoutSecs: Int? { step.timeoutSecs }
    /// JSON text.
    public var metadata: String? { step.metadata }
    public var createdAt: String { RFC3339.format(unixMilliseconds: createdAtMs) }
    public var resolvedAt: String? { resolvedAtMs.map(RFC3339.format(unixMilliseconds:)) }

    public var json: JSONValue {
        ["id": .string(id), "device_id": .string(deviceID), "tenant_id": .string(tenantID), "instance_id": .string(instanceID),
         "block_id": .string(blockID), "sequence_name": sequenceName.map(JSONValue.string) ?? .null,
         "prompt": prompt.map(JSONValue.string) ?? .null, "choices": choices.map(JSONValue.string) ?? .null,
         "store_as": storeAs.map(JSONValue.string) ?? .null, "timeout_secs": timeoutSecs.map { .number(Double($0)) } ?? .null,
         "metadata": metadata.map(JSONValue.string) ?? .null, "state": .string(state.rawValue),
         "resolution": resolution.map(JSONValue.string) ?? .null, "created_at": .string(createdAt),
         "resolved_at": resolvedAt.map(JSONValue.string) ?? .null]
    }

    var orderKey: ApprovalKey { ApprovalKey(createdAtMs: createdAtMs, id: id) }

    /// When a pending approval expires (nil: never).
    var expiryKey: ExpiryKey? {
        guard let timeoutSecs, timeoutSecs > 0 else { return nil }
        return ExpiryKey(deadlineMs: TimeSpan.saturating(createdAtMs, plus: TimeSpan.saturating(Int64(timeoutSecs), times: 1000)), id: id)
    }

    /// The values a resolution may carry: the step's choices, else yes/no.
    public var allowedValues: [String] {
        guard let choices, let parsed = try? JSONValue.parse(choices), let items = parsed.arrayValue, !items.isEmpty else { return ["yes", "no"] }
        return items.compactMap { $0["value"]?.stringValue }
    }

    package init(id: String, deviceID: String, tenantID: String, instanceID: String, blockID: String, sequenceName: String?, prompt: String?, choices: String?, storeAs: String?, timeoutSecs: Int?, metadata: String?, state: State, resolution: String?, createdAtMs: Int64, resolvedAtMs: Int64?) {
        self.init(id: id, deviceID: deviceID, tenantID: tenantID, instanceID: instanceID,
                  step: ApprovalStep(blockID: blockID, sequenceName: sequenceName, prompt: prompt, choices: choices, storeAs: storeAs,
                                     timeoutSecs: timeoutSecs, metadata: metadata),
                  state: state, resolution: resolution, createdAtMs: createdAtMs, resolvedAtMs: resolvedAtMs)
    }

    package init(id: String, deviceID: String, tenantID: String, instanceID: String, step: ApprovalStep, state: State, resolution: String?,
                 createdAtMs: Int64, resolvedAtMs: Int64?) {
        self.id = id
        self.deviceID = deviceID
        self.tenantID = tenantID
        self.instanceID = instanceID
        self.step = step
        self.state = state
        self.resolution = resolution
        self.createdAtMs = createdAtMs
        self.resolvedAtMs = resolvedAtMs
    }
}

/// What every approval of one workflow step repeats: the gate's block, its sequence, what
/// the operator is asked and may answer, where the answer goes, its timeout and metadata.
/// Immutable, so the approvals of a step (a day of a million phones files five million)
/// hold one reference to one of these instead of seven fields each; equal by value.
public final class ApprovalStep: Hashable, Sendable {
    public let blockID: String
    public let sequenceName: String?
    public let prompt: String?
    public let choices: String?
    public let storeAs: String?
    public let timeoutSecs: Int?
    public let metadata: String?

    package init(blockID: String, sequenceName: String?, prompt: String?, choices: String?, storeAs: String?, timeoutSecs: Int?, metadata: String?) {
        self.blockID = blockID
        self.sequenceName = sequenceName
        self.prompt = prompt
        self.choices = choices
        self.storeAs = storeAs
        self.timeoutSecs = timeoutSecs
        self.metadata = metadata
    }

    public static func == (a: ApprovalStep, b: ApprovalStep) -> Bool {
        a === b || (a.blockID == b.blockID && a.sequenceName == b.sequenceName && a.prompt == b.prompt && a.choices == b.choices
                    && a.storeAs == b.storeAs && a.timeoutSecs == b.timeoutSecs && a.metadata == b.metadata)
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(blockID)
        hasher.combine(sequenceName)
        hasher.combine(prompt)
        hasher.combine(storeAs)
    }
}

public struct CommandRecord: Equatable, Sendable {
    public var id: String
    /// Creation order across the server (oldest first delivery).
    public var sequence: Int64
    public var deviceID: String
    public var tenantID: String
    public var type: String
    /// The payload as canonical JSON text: what the database stores, and a fifth of the
    /// memory the parsed value takes (a command's payload is an object holding an object;
    /// a day of a million phones keeps five million of them). Parsed when sent.
    public var payloadText: String
    public var createdAtMs: Int64
    /// When the device acknowledged it (nil: still to be delivered).
    public var ackedAtMs: Int64?

    public var createdAt: String { RFC3339.format(unixMilliseconds: createdAtMs) }
    public var ackedAt: String? { ackedAtMs.map(RFC3339.format(unixMilliseconds:)) }

    public var payload: JSONValue {
        // Always `canonicalText` output (the database's loader parses what it reads), so
        // it parses.
        (try? JSONValue.parse(payloadText)) ?? .null
    }

    package init(id: String, sequence: Int64, deviceID: String, tenantID: String, type: String, payload: JSONValue, createdAtMs: Int64, ackedAtMs: Int64?) {
        self.init(id: id, sequence: sequence, deviceID: deviceID, tenantID: tenantID, type: type, payloadText: payload.canonicalText,
                  createdAtMs: createdAtMs, ackedAtMs: ackedAtMs)
    }

    package init(id: String, sequence: Int64, deviceID: String, tenantID: String, type: String, payloadText: String, createdAtMs: Int64, ackedAtMs: Int64?) {
        self.id = id
        self.sequence = sequence
        self.deviceID = deviceID
        self.tenantID = tenantID
        self.type = type
        self.payloadText = payloadText
        self.createdAtMs = createdAtMs
        self.ackedAtMs = ackedAtMs
    }
}

public struct CredentialRecord: Equatable, Sendable {
    public var id: String
    public var tenantID: String
    public var name: String
    public var kind: String
    /// The secret: a string, or a JSON object whose fields `credentials://id/field` names.
    public var value: JSONValue
    public var refreshToken: String?
    public var enabled: Bool
    public var expiresAt: String?
    public var createdAt: String

    /// What the API shows: never `value` or `refresh_token`.
    public var metadata: JSONValue {
        ["id": .string(id), "tenant_id": .string(tenantID), "name": .string(name), "kind": .string(kind), "enabled": .bool(enabled),
         "expires_at": expiresAt.map(JSONValue.string) ?? .null, "has_refresh_token": .bool(refreshToken != nil),
         "created_at": .string(createdAt)]
    }

    package init(id: String, tenantID: String, name: String, kind: String, value: JSONValue, refreshToken: String?, enabled: Bool, expiresAt: String?, createdAt: String) {
        self.id = id
        self.tenantID = tenantID
        self.name = name
        self.kind = kind
        self.value = value
        self.refreshToken = refreshToken
        self.enabled = enabled
        self.expiresAt = expiresAt
        self.createdAt = createdAt
    }
}

public struct TelemetryRecord: Equatable, Sendable {
    public var tenantID: String
    public var deviceID: String
    public var eventType: String
    public var payload: String
    /// The device's time of the event, as it sent it.
    public var timestamp: String
    /// When the server received it (Unix ms): what retention counts from.
    public var receivedAtMs: Int64

    public var json: JSONValue {
        ["device_id": .string(deviceID), "event_type": .string(eventType), "payload": .string(payload), "timestamp": .string(timestamp),
         "received_at": .string(RFC3339.format(unixMilliseconds: receivedAtMs))]
    }

    package init(tenantID: String, deviceID: String, eventType: String, payload: String, timestamp: String, receivedAtMs: Int64) {
        self.tenantID = tenantID
        self.deviceID = deviceID
        self.eventType = eventType
        self.payload = payload
        self.timestamp = timestamp
        self.receivedAtMs = receivedAtMs
    }
}

public struct TenantRecord: Equatable, Sendable {
    public var tenantID: String
    /// SHA-256 (hex) of the tenant's API key: the key itself is shown once, at creation.
    public var apiKeyHash: String
    public var createdAt: String

    package init(tenantID: String, apiKeyHash: String, createdAt: String) {
        self.tenantID = tenantID
        self.apiKeyHash = apiKeyHash
        self.createdAt = createdAt
    }
}

/// A signed-in dashboard: the caller its API key stood for, until when. Memory only (a
/// restart signs dashboards out); the cookie holds the token, the server its SHA-256.
public struct DashboardSession: Equatable, Sendable {
    public var tenant: String
    public var isRoot: Bool
    public var expiresAt: Instant
}
