public import LabCrypto
public import LabStore
public import MobileSyncServer
import LabKernel

/// The sync server's database file: one table per record type. `apply` commits a
/// request's rows in one transaction; `load` reads everything back into a state, which a
/// test compares with the state that wrote it.
///
/// Secrets at rest: tenant API keys are stored as their SHA-256 (the key is shown once,
/// when the tenant is made); credential values and refresh tokens, signing-key seeds and
/// the secret settings (`secretMeta`: the root API key, the manifest root seed) are sealed
/// with `SecretBox` under `sealingKey`, which the live server keeps in a file of its own
/// (mode 0600) beside the database. A database copied without that file gives none of
/// them. Rows an older build wrote in plain text are read as they are and sealed (or
/// hashed) on load.
public final class SQLiteSyncServerStore {
    public let database: SQLiteDatabase
    let sealingKey: SecretKey32?

    /// Settings in `meta` that are secrets.
    static let secretMeta: Set<String> = [SyncServer.rootKeyMeta, SyncServer.manifestRootSeedMeta]

    static let schema = """
    PRAGMA journal_mode = WAL;
    PRAGMA synchronous = NORMAL;
    CREATE TABLE IF NOT EXISTS tenants (tenant_id TEXT PRIMARY KEY, api_key TEXT NOT NULL UNIQUE, created_at TEXT NOT NULL);
    CREATE TABLE IF NOT EXISTS devices (
        device_id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, push_token TEXT, platform TEXT NOT NULL, app_version TEXT,
        active INTEGER NOT NULL, last_sync_at TEXT, registered_at TEXT NOT NULL);
    CREATE TABLE IF NOT EXISTS instance_status (
        device_id TEXT NOT NULL, instance_id TEXT NOT NULL, tenant_id TEXT NOT NULL, sequence_name TEXT, state TEXT NOT NULL,
        current_step TEXT, handler TEXT, context_summary TEXT, steps TEXT, updated_at TEXT NOT NULL, reported_at_ms INTEGER NOT NULL,
        PRIMARY KEY (device_id, instance_id));
    CREATE TABLE IF NOT EXISTS approvals (
        id TEXT PRIMARY KEY, device_id TEXT NOT NULL, tenant_id TEXT NOT NULL, instance_id TEXT NOT NULL, block_id TEXT NOT NULL,
        sequence_name TEXT, prompt TEXT, choices TEXT, store_as TEXT, timeout_secs INTEGER, metadata TEXT, state TEXT NOT NULL,
        resolution TEXT, created_at TEXT NOT NULL, created_at_ms INTEGER NOT NULL, resolved_at TEXT,
        UNIQUE (device_id, instance_id, block_id));
    CREATE TABLE IF NOT EXISTS commands (
        id TEXT PRIMARY KEY, sequence INTEGER NOT NULL, device_id TEXT NOT NULL, tenant_id TEXT NOT NULL, type TEXT NOT NULL,
        payload TEXT NOT NULL, created_at TEXT NOT NULL, acked_at TEXT);
    CREATE INDEX IF NOT EXISTS commands_pending ON commands (device_id, sequence) WHERE acked_at IS NULL;
    CREATE TABLE IF NOT EXISTS credentials (
        tenant_id TEXT NOT NULL, id TEXT NOT NULL, name TEXT NOT NULL, kind TEXT NOT NULL, value TEXT NOT NULL, refresh_token TEXT,
        enabled INTEGER NOT NULL, expires_at TEXT, created_at TEXT NOT NULL, PRIMARY KEY (tenant_id, id));
    CREATE TABLE IF NOT EXISTS telemetry (
        id INTEGER PRIMARY KEY, tenant_id TEXT NOT NULL, device_id TEXT NOT NULL, event_type TEXT NOT NULL, payload TEXT NOT NULL,
        timestamp TEXT NOT NULL, received_at_ms INTEGER NOT NULL DEFAULT 0);
    CREATE INDEX IF NOT EXISTS telemetry_received ON telemetry (received_at_ms);
    CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE IF NOT EXISTS signing_keys (key_id TEXT PRIMARY KEY, seed_hex TEXT NOT NULL, public_key TEXT NOT NULL,
        created_at TEXT NOT NULL, revoked INTEGER NOT NULL);
    CREATE TABLE IF NOT EXISTS published_sequences (
        tenant_id TEXT NOT NULL, name TEXT NOT NULL, version INTEGER NOT NULL, json TEXT NOT NULL, sha256 TEXT NOT NULL,
        signature TEXT NOT NULL, signing_key_id TEXT NOT NULL, required_handlers TEXT NOT NULL, min_sdk_version TEXT NOT NULL,
        published_at TEXT NOT NULL, PRIMARY KEY (tenant_id, name));
    CREATE TABLE IF NOT EXISTS removed_sequences (tenant_id TEXT NOT NULL, name TEXT NOT NULL, removed_at TEXT NOT NULL,
        PRIMARY KEY (tenant_id, name));
    CREATE TABLE IF NOT EXISTS manifest_versions (tenant_id TEXT PRIMARY KEY, version INTEGER NOT NULL);
    """

    /// `sealingKey` nil keeps secrets in plain text: for tests and the simulator, never for
    /// a served database.
    public init(path: String, sealingKey: SecretKey32? = nil) throws {
        database = try SQLiteDatabase(path: path)
        self.sealingKey = sealingKey
        try database.execute(Self.schema)
        // Databases made before telemetry had a receive time.
        let columns = try database.query("PRAGMA table_info(telemetry)").compactMap { $0[1].text }
        if !columns.contains("received_at_ms") {
            try database.execute("ALTER TABLE telemetry ADD COLUMN received_at_ms INTEGER NOT NULL DEFAULT 0")
        }
    }

    /// A secret as stored: sealed when the store has a key.
    func seal(_ secret: String) -> String {
        guard let sealingKey else { return secret }
        return SecretBox.seal(secret, key: sealingKey)
    }

    /// A stored secret's plain text; text an older build stored unsealed is read as it is.
    func unseal(_ stored: String) throws -> String {
        guard SecretBox.isSealed(stored) else { return stored }
        guard let sealingKey, let plain = SecretBox.open(stored, key: sealingKey) else {
            throw SealedSecretError(path: database.path)
        }
        return plain
    }

    /// Commits one request's rows atomically.
    public func apply(_ changes: [StoreChange]) throws {
        guard !changes.isEmpty else { return }
        try database.transaction {
            for change in changes { try write(change) }
        }
    }

    func text(_ value: String?) -> SQLiteValue { value.map(SQLiteValue.text) ?? .null }
    func int(_ value: Int?) -> SQLiteValue { value.map { .integer(Int64($0)) } ?? .null }

    func write(_ change: StoreChange) throws {
        switch change {
        case .tenant(let t):
            try database.run("INSERT OR REPLACE INTO tenants VALUES (?, ?, ?)", [.text(t.tenantID), .text(t.apiKeyHash), .text(t.createdAt)])
        case .device(let d):
            try database.run("INSERT OR REPLACE INTO devices VALUES (?, ?, ?, ?, ?, ?, ?, ?)", [
                .text(d.deviceID), .text(d.tenantID), text(d.pushToken), .text(d.platform), text(d.appVersion),
                .integer(d.active ? 1 : 0), text(d.lastSyncAt), .text(d.registeredAt)])
        case .status(let s):
            try database.run("INSERT OR REPLACE INTO instance_status VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", [
                .text(s.deviceID), .text(s.instanceID), .text(s.tenantID), text(s.sequenceName), .text(s.state), text(s.currentStep),
                text(s.handler), text(s.contextSummary), text(s.steps), .text(s.updatedAt), .integer(s.reportedAtMs)])
        case .approval(let a):
            try database.run("INSERT OR REPLACE INTO approvals VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", [
                .text(a.id), .text(a.deviceID), .text(a.tenantID), .text(a.instanceID), .text(a.blockID), text(a.sequenceName),
                text(a.prompt), text(a.choices), text(a.storeAs), int(a.timeoutSecs), text(a.metadata), .text(a.state.rawValue),
                text(a.resolution), .text(a.createdAt), .integer(a.createdAtMs), text(a.resolvedAt)])
        case .command(let c):
            try database.run("INSERT OR REPLACE INTO commands VALUES (?, ?, ?, ?, ?, ?, ?, ?)", [
                .text(c.id), .integer(c.sequence), .text(c.deviceID), .text(c.tenantID), .text(c.type), .text(c.payloadText),
                .text(c.createdAt), text(c.ackedAt)])
        case .credential(let c):
            try database.run("INSERT OR REPLACE INTO credentials VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", [
                .text(c.tenantID), .text(c.id), .text(c.name), .text(c.kind), .text(seal(c.value.canonicalText)), text(c.refreshToken.map(seal)),
                .integer(c.enabled ? 1 : 0), text(c.expiresAt), .text(c.createdAt)])
        case .telemetry(let rows):
            let insert = try database.statement(
                "INSERT INTO telemetry (tenant_id, device_id, event_type, payload, timestamp, received_at_ms) VALUES (?, ?, ?, ?, ?, ?)")
            for row in rows {
                insert.reset()
                try insert.bind([.text(row.tenantID), .text(row.deviceID), .text(row.eventType), .text(row.payload), .text(row.timestamp),
                                 .integer(row.receivedAtMs)])
                try insert.execute()
            }
        case .meta(let key, let value):
            try database.run("INSERT OR REPLACE INTO meta VALUES (?, ?)", [.text(key), .text(Self.secretMeta.contains(key) ? seal(value) : value)])
        case .signingKey(let k):
            try database.run("INSERT OR REPLACE INTO signing_keys VALUES (?, ?, ?, ?, ?)", [
                .text(k.keyID), .text(seal(k.seedHex)), .text(k.publicKey), .text(k.createdAt), .integer(k.revoked ? 1 : 0)])
        case .deleteCommand(let id):
            try database.run("DELETE FROM commands WHERE id = ?", [.text(id)])
        case .deleteApproval(let id):
            try database.run("DELETE FROM approvals WHERE id = ?", [.text(id)])
        case .deleteMeta(let key):
            try database.run("DELETE FROM meta WHERE key = ?", [.text(key)])
        case .pruneTelemetry(let beforeMs):
            try database.run("DELETE FROM telemetry WHERE received_at_ms < ?", [.integer(beforeMs)])
        case .publishedSequence(let s):
            try database.run("INSERT OR REPLACE INTO published_sequences VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", [
                .text(s.tenantID), .text(s.name), .integer(Int64(s.version)), .text(s.json), .text(s.sha256), .text(s.signature),
                .text(s.signingKeyID), .text(JSONValue.array(s.requiredHandlers.map(JSONValue.string)).canonicalText),
                .text(s.minSDKVersion), .text(s.publishedAt)])
            try database.run("DELETE FROM removed_sequences WHERE tenant_id = ? AND name = ?", [.text(s.tenantID), .text(s.name)])
        case .removedSequence(let r):
            try database.run("DELETE FROM published_sequences WHERE tenant_id = ? AND name = ?", [.text(r.tenantID), .text(r.name)])
            try database.run("INSERT OR REPLACE INTO removed_sequences VALUES (?, ?, ?)", [.text(r.tenantID), .text(r.name), .text(r.removedAt)])
        case .manifestVersion(let tenant, let version):
            try database.run("INSERT OR REPLACE INTO manifest_versions VALUES (?, ?)", [.text(tenant), .integer(version)])
        }
    }

    /// Everything, as the server holds it in memory. Secrets an older build stored in plain
    /// text are sealed (and tenant keys hashed) in the same call.
    public func load() throws -> SyncServerState {
        var state = SyncServerState()
        var upgraded: [StoreChange] = []
        func s(_ v: SQLiteValue) -> String { v.text ?? "" }
        func o(_ v: SQLiteValue) -> String? { v.text }
        func i(_ v: SQLiteValue) -> Int64 { v.integer ?? 0 }
        func json(_ v: SQLiteValue) -> JSONValue { (try? JSONValue.parse(s(v))) ?? .null }
        /// A time column the server wrote (`RFC3339.format`), as Unix milliseconds.
        func ms(_ v: SQLiteValue) -> Int64? { v.text.flatMap(RFC3339.parse) }
        /// A secret column: its plain text, noting rows to seal again.
        func secret(_ v: SQLiteValue, upgrade: @autoclosure () -> Void) throws -> String {
            let stored = s(v)
            if sealingKey != nil && !SecretBox.isSealed(stored) { upgrade() }
            return try unseal(stored)
        }
        for r in try database.query("SELECT tenant_id, api_key, created_at FROM tenants") {
            var tenant = TenantRecord(tenantID: s(r[0]), apiKeyHash: s(r[1]), createdAt: s(r[2]))
            if tenant.apiKeyHash.hasPrefix("fl_") {
                // A key an older build stored as it was: keep its hash only.
                tenant.apiKeyHash = SyncServer.keyHash(tenant.apiKeyHash)
                upgraded.append(.tenant(tenant))
            }
            state.tenants[tenant.tenantID] = tenant
        }
        for r in try database.query("SELECT * FROM devices") {
            state.devices[s(r[0])] = DeviceRecord(deviceID: s(r[0]), tenantID: s(r[1]), pushToken: o(r[2]), platform: s(r[3]),
                                                  appVersion: o(r[4]), active: i(r[5]) != 0, lastSyncAtMs: ms(r[6]), registeredAtMs: ms(r[7]) ?? 0)
        }
        for r in try database.query("SELECT * FROM instance_status") {
            state.statuses[s(r[0]), default: [:]][s(r[1])] = StatusRecord(
                deviceID: s(r[0]), tenantID: s(r[2]), instanceID: s(r[1]), sequenceName: o(r[3]), state: s(r[4]), currentStep: o(r[5]),
                handler: o(r[6]), contextSummary: o(r[7]), steps: o(r[8]), updatedAtMs: ms(r[9]) ?? 0, reportedAtMs: i(r[10]))
        }
        for r in try database.query("SELECT * FROM approvals") {
            state.approvals[s(r[0])] = ApprovalRecord(
                id: s(r[0]), deviceID: s(r[1]), tenantID: s(r[2]), instanceID: s(r[3]), blockID: s(r[4]), sequenceName: o(r[5]),
                prompt: o(r[6]), choices: o(r[7]), storeAs: o(r[8]), timeoutSecs: r[9].integer.map(Int.init), metadata: o(r[10]),
                state: ApprovalRecord.State(rawValue: s(r[11])) ?? .pending, resolution: o(r[12]),
                createdAtMs: i(r[14]), resolvedAtMs: ms(r[15]))
        }
        for r in try database.query("SELECT * FROM commands") {
            state.commands[s(r[0])] = CommandRecord(id: s(r[0]), sequence: i(r[1]), deviceID: s(r[2]), tenantID: s(r[3]), type: s(r[4]),
                                                    payload: json(r[5]), createdAtMs: ms(r[6]) ?? 0, ackedAtMs: ms(r[7]))
        }
        for r in try database.query("SELECT * FROM credentials") {
            var sealedAgain = false
            let value = try secret(r[4], upgrade: sealedAgain = true)
            let refresh = try r[5].text.map { try secret(.text($0), upgrade: sealedAgain = true) }
            let record = CredentialRecord(
                id: s(r[1]), tenantID: s(r[0]), name: s(r[2]), kind: s(r[3]), value: (try? JSONValue.parse(value)) ?? .null,
                refreshToken: refresh, enabled: i(r[6]) != 0, expiresAt: o(r[7]), createdAt: s(r[8]))
            state.credentials[SyncServerState.credentialKey(record.tenantID, record.id)] = record
            if sealedAgain { upgraded.append(.credential(record)) }
        }
        let recent = """
            SELECT tenant_id, device_id, event_type, payload, timestamp, received_at_ms FROM (
                SELECT *, ROW_NUMBER() OVER (PARTITION BY device_id ORDER BY id DESC) AS newest FROM telemetry)
            WHERE newest <= ? ORDER BY id
            """
        for r in try database.query(recent, [.integer(Int64(SyncServerState.recentTelemetryPerDevice))]) {
            state.recentTelemetry[s(r[1]), default: []].append(TelemetryRecord(
                tenantID: s(r[0]), deviceID: s(r[1]), eventType: s(r[2]), payload: s(r[3]), timestamp: s(r[4]), receivedAtMs: i(r[5])))
        }
        for r in try database.query("SELECT key, value FROM meta") {
            let key = s(r[0])
            guard Self.secretMeta.contains(key) else { state.meta[key] = s(r[1]); continue }
            let value = try secret(r[1], upgrade: upgraded.append(.meta(key: key, value: s(r[1]))))
            state.meta[key] = value
        }
        for r in try database.query("SELECT * FROM signing_keys") {
            var sealedAgain = false
            let key = SigningKeyRecord(keyID: s(r[0]), seedHex: try secret(r[1], upgrade: sealedAgain = true), publicKey: s(r[2]),
                                       createdAt: s(r[3]), revoked: i(r[4]) != 0)
            state.manifest.signingKeys[key.keyID] = key
            if sealedAgain { upgraded.append(.signingKey(key)) }
        }
        for r in try database.query("SELECT * FROM published_sequences") {
            let sequence = PublishedSequence(
                tenantID: s(r[0]), name: s(r[1]), version: Int(i(r[2])), json: s(r[3]), sha256: s(r[4]), signature: s(r[5]),
                signingKeyID: s(r[6]), requiredHandlers: json(r[7]).arrayValue?.compactMap(\.stringValue) ?? [],
                minSDKVersion: s(r[8]), publishedAt: s(r[9]))
            state.manifest.sequences[PublishedSequence.key(sequence.tenantID, sequence.name)] = sequence
        }
        for r in try database.query("SELECT * FROM removed_sequences") {
            state.manifest.removed[PublishedSequence.key(s(r[0]), s(r[1]))] = RemovedSequence(tenantID: s(r[0]), name: s(r[1]), removedAt: s(r[2]))
        }
        for r in try database.query("SELECT * FROM manifest_versions") { state.manifest.versions[s(r[0])] = i(r[1]) }
        state.reindex()
        try apply(upgraded)
        return state
    }
}

/// The database holds sealed secrets that its key file does not open: another server's
/// file, or a key file replaced since.
public struct SealedSecretError: Error, CustomStringConvertible {
    public var path: String
    public var description: String {
        "\(path) holds secrets sealed under another key: restore the key file that was beside it, or start from an empty --data"
    }
}
