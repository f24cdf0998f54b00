import LabKernel

/// Everything the sync server knows, as values. The live driver persists each change to
/// SQLite (`SQLiteSyncServerStore`) and loads the whole state at start; the simulator
/// keeps it in memory, where a "crash" loses in-flight requests but not the state, and
/// sets finished rows aside into an archive (`SyncServerState+History`).
///
/// Every mutation goes through a method here that also appends the row it wrote to
/// `changes`; the server hands the log out with each response (`.persist`), so a driver
/// commits exactly what the request changed before it answers.
public struct SyncServerState: Equatable, Sendable {
    public package(set) var tenants: [String: TenantRecord] = [:]
    /// API key → tenant id.
    var tenantByKey: [String: String] = [:]
    public package(set) var devices: [String: DeviceRecord] = [:]
    /// By device, then instance.
    public package(set) var statuses: [String: [String: StatusRecord]] = [:]
    public package(set) var approvals: [String: ApprovalRecord] = [:]
    /// Each device's approvals: a device's listing sorts its few rows when asked, and the
    /// approval of a gate (one per gate) is found among them. (A table by gate, three
    /// strings a key, held a twentieth of a day's memory.)
    var approvalsByDevice: [String: [String]] = [:]
    public package(set) var commands: [String: CommandRecord] = [:]
    /// Unacknowledged command ids per device, oldest first.
    public package(set) var pendingByDevice: [String: [String]] = [:]
    public package(set) var nextCommandSequence: Int64 = 1
    public package(set) var credentials: [String: CredentialRecord] = [:]
    /// Telemetry rows live in the database; memory keeps each device's most recent
    /// events (at most `recentTelemetryPerDevice`), for the API and the dashboard page.
    public package(set) var recentTelemetry: [String: [TelemetryRecord]] = [:]
    public static let recentTelemetryPerDevice = 200
    /// Signed-in dashboards by the SHA-256 of their cookie's token (never stored).
    var dashboardSessions: [String: DashboardSession] = [:]
    /// When retention last ran (`SyncServer+Retention.swift`).
    var lastPrune: Instant?
    /// Server settings and keys: the root API key, the manifest root key's seed, …
    public package(set) var meta: [String: String] = [:]
    public package(set) var manifest = ManifestState()

    /// Texts that many rows repeat, each kept once (`shared`).
    var sharedTexts: Set<String> = []
    /// The steps approvals repeat, each kept once (`shared`).
    var sharedSteps: Set<ApprovalStep> = []
    /// How many distinct texts, and steps, are shared at most: a step's prompt is the same
    /// in every approval of that step, but a client could send a new one each time.
    static let sharedTextLimit = 4096

    /// Where finished rows go, when the driver hands one over (`SyncServerState+History`).
    public internal(set) var archive: (any SyncHistoryArchive)?

    /// Rows written since the log was last taken.
    public package(set) var changes: [StoreChange] = []

    /// The listings' orders (OrderedIndex.swift): derived, rebuilt by `reindex`.
    var approvalOrder = OrderedIndex<ApprovalKey>()
    var statusOrder = OrderedIndex<StatusKey>()
    var deviceOrder = OrderedIndex<String>()
    /// Pending approvals with a timeout, by deadline (server-wide).
    var expiryOrder = SortedChunks<ExpiryKey>()

    public init() {}

    public mutating func takeChanges() -> [StoreChange] {
        let taken = changes
        changes.removeAll(keepingCapacity: true)
        return taken
    }

    /// Equality ignores the change log, and compares what is in memory only: the rows set
    /// aside into an archive are the archive's.
    public static func == (a: SyncServerState, b: SyncServerState) -> Bool {
        a.tenants == b.tenants && a.devices == b.devices && a.statuses == b.statuses && a.approvals == b.approvals
            && a.commands == b.commands && a.pendingByDevice == b.pendingByDevice && a.nextCommandSequence == b.nextCommandSequence
            && a.credentials == b.credentials && a.recentTelemetry == b.recentTelemetry && a.meta == b.meta && a.manifest == b.manifest
    }

    // MARK: Writes (each logs its row)

    mutating func put(_ tenant: TenantRecord) {
        tenants[tenant.tenantID] = tenant
        tenantByKey[tenant.apiKeyHash] = tenant.tenantID
        changes.append(.tenant(tenant))
    }

    mutating func put(_ device: DeviceRecord) {
        index(device, replacing: devices[device.deviceID])
        devices[device.deviceID] = device
        changes.append(.device(device))
    }

    mutating func put(_ status: StatusRecord) {
        changes.append(.status(status))
        if let archive {
            if status.isFinal { return setAside(status, into: archive) }
            if statuses[status.deviceID]?[status.instanceID] == nil { archive.removeStatus(device: status.deviceID, instance: status.instanceID) }
        }
        index(status, replacing: statuses[status.deviceID]?[status.instanceID])
        statuses[status.deviceID, default: [:]][status.instanceID] = status
    }

    mutating func put(_ approval: ApprovalRecord) {
        changes.append(.approval(approval))
        if let archive, approval.state != .pending { return setAside(approval, into: archive) }
        index(approval, replacing: approvals[approval.id])
        approvals[approval.id] = approval
    }

    // MARK: The listings' orders

    mutating func index(_ device: DeviceRecord, replacing old: DeviceRecord?) {
        if let old { deviceOrder.remove(old.deviceID, tenant: old.tenantID) }
        deviceOrder.insert(device.deviceID, tenant: device.tenantID)
    }

    mutating func index(_ status: StatusRecord, replacing old: StatusRecord?) {
        if let old { statusOrder.remove(old.orderKey, tenant: old.tenantID) }
        statusOrder.insert(status.orderKey, tenant: status.tenantID)
    }

    mutating func index(_ approval: ApprovalRecord, replacing old: ApprovalRecord?) {
        if old == nil { approvalsByDevice[approval.deviceID, default: []].append(approval.id) }
        if let old {
            approvalOrder.remove(old.orderKey, tenant: old.tenantID, state: old.state.rawValue)
            if let expiry = old.expiryKey { expiryOrder.remove(expiry) }
        }
        approvalOrder.insert(approval.orderKey, tenant: approval.tenantID, state: approval.state.rawValue)
        if approval.state == .pending, let expiry = approval.expiryKey { expiryOrder.insert(expiry) }
    }

    /// Takes a removed approval out of the device's list and the orders.
    mutating func unindex(_ approval: ApprovalRecord) {
        approvalsByDevice[approval.deviceID]?.removeAll { $0 == approval.id }
        if approvalsByDevice[approval.deviceID]?.isEmpty == true { approvalsByDevice[approval.deviceID] = nil }
        approvalOrder.remove(approval.orderKey, tenant: approval.tenantID, state: approval.state.rawValue)
        if let expiry = approval.expiryKey { expiryOrder.remove(expiry) }
    }

    mutating func put(_ command: CommandRecord) {
        if let archive, command.ackedAtMs != nil {
            changes.append(.command(command))
            nextCommandSequence = max(nextCommandSequence, command.sequence + 1)
            return setAside(command, into: archive)
        }
        let isNew = commands[command.id] == nil
        commands[command.id] = command
        if isNew && command.ackedAtMs == nil { pendingByDevice[command.deviceID, default: []].append(command.id) }
        if command.ackedAtMs != nil, var pending = pendingByDevice[command.deviceID] {
            pending.removeAll { $0 == command.id }
            pendingByDevice[command.deviceID] = pending.isEmpty ? nil : pending
        }
        nextCommandSequence = max(nextCommandSequence, command.sequence + 1)
        changes.append(.command(command))
    }

    mutating func put(_ credential: CredentialRecord) {
        credentials[Self.credentialKey(credential.tenantID, credential.id)] = credential
        changes.append(.credential(credential))
    }

    mutating func add(_ telemetry: [TelemetryRecord]) {
        for row in telemetry {
            var recent = recentTelemetry.removeValue(forKey: row.deviceID) ?? []
            recent.append(row)
            if recent.count > Self.recentTelemetryPerDevice { recent.removeFirst(recent.count - Self.recentTelemetryPerDevice) }
            recentTelemetry[row.deviceID] = recent
        }
        changes.append(.telemetry(telemetry))
    }

    mutating func remove(command id: String) {
        guard let command = commands.removeValue(forKey: id) else { return }
        if var pending = pendingByDevice[command.deviceID] {
            pending.removeAll { $0 == id }
            pendingByDevice[command.deviceID] = pending.isEmpty ? nil : pending
        }
        changes.append(.deleteCommand(id))
    }

    mutating func remove(approval id: String) {
        guard let approval = approvals.removeValue(forKey: id) else { return }
        unindex(approval)
        changes.append(.deleteApproval(id))
    }

    /// Forgets telemetry received before `beforeMs`: the database's rows and the recent
    /// events kept in memory.
    mutating func pruneTelemetry(before beforeMs: Int64) {
        for (device, rows) in recentTelemetry where rows.first.map({ $0.receivedAtMs < beforeMs }) == true {
            let kept = rows.filter { $0.receivedAtMs >= beforeMs }
            recentTelemetry[device] = kept.isEmpty ? nil : kept
        }
        changes.append(.pruneTelemetry(beforeMs: beforeMs))
    }

    mutating func removeMeta(_ key: String) {
        guard meta.removeValue(forKey: key) != nil else { return }
        changes.append(.deleteMeta(key))
    }

    mutating func setMeta(_ key: String, _ value: String) {
        meta[key] = value
        changes.append(.meta(key: key, value: value))
    }

    mutating func put(_ key: SigningKeyRecord) {
        manifest.signingKeys[key.keyID] = key
        changes.append(.signingKey(key))
    }

    mutating func put(_ sequence: PublishedSequence) {
        manifest.sequences[PublishedSequence.key(sequence.tenantID, sequence.name)] = sequence
        manifest.removed[PublishedSequence.key(sequence.tenantID, sequence.name)] = nil
        changes.append(.publishedSequence(sequence))
    }

    mutating func remove(sequence name: String, tenant: String, at removedAt: String) {
        manifest.sequences[PublishedSequence.key(tenant, name)] = nil
        let removed = RemovedSequence(tenantID: tenant, name: name, removedAt: removedAt)
        manifest.removed[PublishedSequence.key(tenant, name)] = removed
        changes.append(.removedSequence(removed))
    }

    mutating func bumpManifestVersion(tenant: String, to version: Int64) {
        manifest.versions[tenant] = version
        changes.append(.manifestVersion(tenant: tenant, version: version))
    }

    /// `text`, as the copy other rows already hold when one does. A string longer than 15
    /// bytes is a heap object of its own; the names, prompts and choices a workflow's
    /// approvals and statuses carry are the same in all of them (a day of a million phones
    /// files five million approvals), so they share one.
    mutating func shared(_ text: String) -> String {
        guard text.utf8.count > 15 else { return text }  // held inline: nothing to share
        // One hash lookup: `insert` hands back the copy already held when there is one.
        if sharedTexts.count < Self.sharedTextLimit { return sharedTexts.insert(text).memberAfterInsert }
        return sharedTexts.firstIndex(of: text).map { sharedTexts[$0] } ?? text
    }

    mutating func shared(_ text: String?) -> String? { text.map { shared($0) } }

    /// `step`, as the one other approvals already hold when one does (its texts shared
    /// too, for the steps that differ only in part).
    mutating func shared(_ step: ApprovalStep) -> ApprovalStep {
        if let held = sharedSteps.firstIndex(of: step) { return sharedSteps[held] }
        let step = ApprovalStep(blockID: shared(step.blockID), sequenceName: shared(step.sequenceName), prompt: shared(step.prompt),
                                choices: shared(step.choices), storeAs: shared(step.storeAs), timeoutSecs: step.timeoutSecs,
                                metadata: shared(step.metadata))
        if sharedSteps.count < Self.sharedTextLimit { sharedSteps.insert(step) }
        return step
    }

    // MARK: Reads

    package static func credentialKey(_ tenant: String, _ id: String) -> String { "\(tenant)|\(id)" }

    /// The tenant of an API key (looked up by its hash).
    public func tenant(forKey key: String) -> String? { tenantByKey[SyncServer.keyHash(key)] }

    /// The approval of a gate: the step `block` of `instance` waiting on `device`.
    public func approval(device: String, instance: String, block: String) -> ApprovalRecord? {
        for id in approvalsByDevice[device] ?? [] {
            if let approval = approvals[id], approval.instanceID == instance, approval.blockID == block { return approval }
        }
        return archive?.approval(device: device, instance: instance, block: block)
    }

    public func credential(tenant: String, id: String) -> CredentialRecord? {
        credentials[Self.credentialKey(tenant, id)]
    }

    /// Unacknowledged commands of a device, oldest first.
    public func pendingCommands(device: String, limit: Int = .max) -> [CommandRecord] {
        (pendingByDevice[device] ?? []).prefix(limit).compactMap { commands[$0] }
    }

    /// Rebuilds the indexes after loading rows (the SQLite store fills the tables).
    package mutating func reindex() {
        approvalOrder = OrderedIndex()
        statusOrder = OrderedIndex()
        deviceOrder = OrderedIndex()
        expiryOrder = SortedChunks()
        approvalsByDevice = [:]
        for device in devices.values { index(device, replacing: nil) }
        for byInstance in statuses.values { for status in byInstance.values { index(status, replacing: nil) } }
        for approval in approvals.values { index(approval, replacing: nil) }
        tenantByKey = Dictionary(tenants.values.map { ($0.apiKeyHash, $0.tenantID) }, uniquingKeysWith: { first, _ in first })
        var pending: [String: [CommandRecord]] = [:]
        for command in commands.values where command.ackedAtMs == nil { pending[command.deviceID, default: []].append(command) }
        pendingByDevice = pending.mapValues { $0.sorted { $0.sequence < $1.sequence }.map(\.id) }
        nextCommandSequence = (commands.values.map(\.sequence).max() ?? 0) + 1
        changes = []
    }
}

/// One row written, for the driver to persist.
public enum StoreChange: Equatable, Sendable {
    case tenant(TenantRecord)
    case device(DeviceRecord)
    case status(StatusRecord)
    case approval(ApprovalRecord)
    case command(CommandRecord)
    case credential(CredentialRecord)
    case telemetry([TelemetryRecord])
    case meta(key: String, value: String)
    case signingKey(SigningKeyRecord)
    case publishedSequence(PublishedSequence)
    case removedSequence(RemovedSequence)
    case manifestVersion(tenant: String, version: Int64)
    /// Retention: rows that are forgotten (`SyncServer+Retention.swift`).
    case deleteCommand(String)
    case deleteApproval(String)
    case deleteMeta(String)
    /// Telemetry received before this Unix millisecond is deleted.
    case pruneTelemetry(beforeMs: Int64)
}

/// What the manifest publisher keeps.
public struct ManifestState: Equatable, Sendable {
    public package(set) var signingKeys: [String: SigningKeyRecord] = [:]
    /// "tenant|name" → the newest published version.
    public package(set) var sequences: [String: PublishedSequence] = [:]
    public package(set) var removed: [String: RemovedSequence] = [:]
    public package(set) var versions: [String: Int64] = [:]
}

public struct SigningKeyRecord: Equatable, Sendable {
    public var keyID: String
    /// Hex of the Ed25519 seed (the server's own secret; never served).
    public var seedHex: String
    /// Base64 of the 32-byte public key.
    public var publicKey: String
    public var createdAt: String
    public var revoked: Bool

    package init(keyID: String, seedHex: String, publicKey: String, createdAt: String, revoked: Bool) {
        self.keyID = keyID
        self.seedHex = seedHex
        self.publicKey = publicKey
        self.createdAt = createdAt
        self.revoked = revoked
    }
}

public struct PublishedSequence: Equatable, Sendable {
    public var tenantID: String
    public var name: String
    public var version: Int
    /// The exact bytes served (UTF-8 JSON).
    public var json: String
    /// Lowercase hex SHA-256 of `json`.
    public var sha256: String
    /// Base64 Ed25519 signature of `json` by `signingKeyID`.
    public var signature: String
    public var signingKeyID: String
    public var requiredHandlers: [String]
    public var minSDKVersion: String
    public var publishedAt: String

    package static func key(_ tenant: String, _ name: String) -> String { "\(tenant)|\(name)" }

    package init(tenantID: String, name: String, version: Int, json: String, sha256: String, signature: String, signingKeyID: String, requiredHandlers: [String], minSDKVersion: String, publishedAt: String) {
        self.tenantID = tenantID
        self.name = name
        self.version = version
        self.json = json
        self.sha256 = sha256
        self.signature = signature
        self.signingKeyID = signingKeyID
        self.requiredHandlers = requiredHandlers
        self.minSDKVersion = minSDKVersion
        self.publishedAt = publishedAt
    }
}

public struct RemovedSequence: Equatable, Sendable {
    public var tenantID: String
    public var name: String
    public var removedAt: String

    package init(tenantID: String, name: String, removedAt: String) {
        self.tenantID = tenantID
        self.name = name
        self.removedAt = removedAt
    }
}
