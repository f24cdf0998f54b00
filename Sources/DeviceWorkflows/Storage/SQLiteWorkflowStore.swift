public import LabKernel
public import LabStore

/// The device database: one SQLite file per device, in WAL mode.
///
/// Tables: `sequences` (the JSON of each loaded version), `instances` (one row per
/// instance: metadata columns, `context` = context.data as JSON, `tree` = the execution
/// tree as JSON), `handler_journal` (results recorded before the engine applied them),
/// `telemetry`, `sync_outbox` and `executed_commands` (used by the sync reporter).
/// docs/workflows.md shows the schema.
public final class SQLiteWorkflowStore: WorkflowStore {
    public let database: SQLiteDatabase
    var inTransaction = false

    static let schema = """
    PRAGMA journal_mode = WAL;
    PRAGMA synchronous = NORMAL;
    CREATE TABLE IF NOT EXISTS sequences (
        name TEXT NOT NULL, version INTEGER NOT NULL, json TEXT NOT NULL, loaded_order INTEGER NOT NULL,
        PRIMARY KEY (name, version));
    CREATE TABLE IF NOT EXISTS instances (
        id TEXT PRIMARY KEY, sequence_name TEXT NOT NULL, sequence_version INTEGER NOT NULL, state TEXT NOT NULL,
        seq INTEGER NOT NULL, dedup_key TEXT, created_ns INTEGER NOT NULL, updated_ns INTEGER NOT NULL,
        context TEXT NOT NULL, tree TEXT NOT NULL, meta TEXT NOT NULL);
    CREATE INDEX IF NOT EXISTS instances_state ON instances (state);
    CREATE TABLE IF NOT EXISTS handler_journal (
        instance_id TEXT NOT NULL, node INTEGER NOT NULL, attempt INTEGER NOT NULL, outcome TEXT NOT NULL,
        PRIMARY KEY (instance_id, node, attempt));
    CREATE TABLE IF NOT EXISTS telemetry (
        id INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL, instance_id TEXT NOT NULL, block_id TEXT,
        detail TEXT NOT NULL, timestamp TEXT NOT NULL);
    CREATE TABLE IF NOT EXISTS sync_outbox (
        entry_type TEXT NOT NULL, entry_key TEXT NOT NULL, payload TEXT NOT NULL, created_ns INTEGER NOT NULL,
        PRIMARY KEY (entry_type, entry_key));
    CREATE TABLE IF NOT EXISTS executed_commands (
        command_id TEXT PRIMARY KEY, executed_ns INTEGER NOT NULL, acked INTEGER NOT NULL DEFAULT 0);
    """

    public init(path: String) throws {
        database = try SQLiteDatabase(path: path)
        try database.execute(Self.schema)
    }

    public func begin() throws {
        guard !inTransaction else { return }
        try database.execute("BEGIN IMMEDIATE")
        inTransaction = true
    }

    public func commit() throws {
        guard inTransaction else { return }
        try database.execute("COMMIT")
        inTransaction = false
    }

    public func rollback() {
        guard inTransaction else { return }
        try? database.execute("ROLLBACK")
        inTransaction = false
    }

    public func apply(_ effect: EngineEffect) throws {
        switch effect {
        case .persist(let instance):
            var meta = instance.json.objectValue ?? [:]
            let context = meta.removeValue(forKey: "data") ?? [:]
            let tree = meta.removeValue(forKey: "nodes") ?? []
            let upsert = try database.statement("""
                INSERT INTO instances (id, sequence_name, sequence_version, state, seq, dedup_key, created_ns, updated_ns, context, tree, meta)
                VALUES (?,?,?,?,?,?,?,?,?,?,?)
                ON CONFLICT (id) DO UPDATE SET state = excluded.state, updated_ns = excluded.updated_ns,
                    context = excluded.context, tree = excluded.tree, meta = excluded.meta
                """)
            try upsert.bind([
                .text(instance.id), .text(instance.sequenceName), .integer(Int64(instance.sequenceVersion)), .text(instance.state.rawValue),
                .integer(Int64(bitPattern: instance.sequenceNumber)), instance.dedupKey.map { .text($0) } ?? .null,
                .integer(instance.createdAt.nanoseconds), .integer(instance.updatedAt.nanoseconds),
                .text(context.canonicalText), .text(tree.canonicalText), .text(JSONValue.object(meta).canonicalText),
            ])
            try upsert.execute()
            try pruneJournal(for: instance)
        case .delete(let id):
            try database.run("DELETE FROM instances WHERE id = ?", [.text(id)])
            try database.run("DELETE FROM handler_journal WHERE instance_id = ?", [.text(id)])
        case .storeSequence(let name, let version, let json):
            try database.run("""
                INSERT INTO sequences (name, version, json, loaded_order) VALUES (?, ?, ?, (SELECT COALESCE(MAX(loaded_order), 0) + 1 FROM sequences))
                ON CONFLICT (name, version) DO UPDATE SET json = excluded.json
                """, [.text(name), .integer(Int64(version)), .text(json)])
        case .removeSequence(let name, let version):
            try database.run("DELETE FROM sequences WHERE name = ? AND version = ?", [.text(name), .integer(Int64(version))])
        case .telemetry(let event):
            let insert = try database.statement(
                "INSERT INTO telemetry (kind, instance_id, block_id, detail, timestamp) VALUES (?,?,?,?,?)")
            try insert.bind([.text(event.kind.rawValue), .text(event.instanceID), event.blockID.map { .text($0) } ?? .null,
                             .text(event.detail), .text(event.timestamp)])
            try insert.execute()
        case .invoke, .instanceCompleted, .instanceFailed, .stepPending:
            return
        }
    }

    func pruneJournal(for instance: WorkflowInstance) throws {
        let rows = try database.query("SELECT node, attempt FROM handler_journal WHERE instance_id = ?", [.text(instance.id)])
        guard !rows.isEmpty else { return }
        let keys = rows.map { InvocationKey(instanceID: instance.id, node: Int32($0[0].integer ?? 0), attempt: Int16($0[1].integer ?? 0)) }
        for key in staleJournalKeys(keys, for: instance) {
            try database.run("DELETE FROM handler_journal WHERE instance_id = ? AND node = ? AND attempt = ?",
                             [.text(key.instanceID), .integer(Int64(key.node)), .integer(Int64(key.attempt))])
        }
    }

    public func journal(_ key: InvocationKey, _ outcome: HandlerOutcome) throws {
        try database.run("INSERT OR REPLACE INTO handler_journal (instance_id, node, attempt, outcome) VALUES (?,?,?,?)",
                         [.text(key.instanceID), .integer(Int64(key.node)), .integer(Int64(key.attempt)), .text(outcome.json.canonicalText)])
    }

    public func journaledOutcome(_ key: InvocationKey) throws -> HandlerOutcome? {
        let rows = try database.query("SELECT outcome FROM handler_journal WHERE instance_id = ? AND node = ? AND attempt = ?",
                                      [.text(key.instanceID), .integer(Int64(key.node)), .integer(Int64(key.attempt))])
        guard let text = rows.first?.first?.text, let json = try? JSONValue.parse(text) else { return nil }
        return HandlerOutcome(json: json)
    }

    public func loadState() throws -> MobileEngine.StoredState {
        let sequences = try database.query("SELECT json FROM sequences ORDER BY loaded_order").compactMap { $0.first?.text }
        var instances: [WorkflowInstance] = []
        for row in try database.query("SELECT context, tree, meta FROM instances ORDER BY seq") {
            guard let context = row[0].text, let tree = row[1].text, let metaText = row[2].text,
                  var meta = try? JSONValue.parse(metaText).objectValue else { continue }
            meta["data"] = try? JSONValue.parse(context)
            meta["nodes"] = try? JSONValue.parse(tree)
            if let instance = WorkflowInstance(json: .object(meta)) { instances.append(instance) }
        }
        return MobileEngine.StoredState(sequences: sequences, instances: instances)
    }

    public func telemetry(limit: Int) throws -> [(id: Int64, event: TelemetryEvent)] {
        try database.query("SELECT id, kind, instance_id, block_id, detail, timestamp FROM telemetry ORDER BY id LIMIT ?",
                           [.integer(Int64(limit))]).compactMap { row in
            guard let kind = row[1].text.flatMap(TelemetryEvent.Kind.init) else { return nil }
            return (row[0].integer ?? 0, TelemetryEvent(kind: kind, instanceID: row[2].text ?? "", blockID: row[3].text,
                                                        detail: row[4].text ?? "", timestamp: row[5].text ?? ""))
        }
    }

    public func removeTelemetry(through id: Int64) throws {
        try database.run("DELETE FROM telemetry WHERE id <= ?", [.integer(id)])
    }
}
