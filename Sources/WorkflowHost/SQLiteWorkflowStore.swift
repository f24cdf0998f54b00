import LabKernel
public import DeviceWorkflows
import Orch8Wire
public import LabStore

/// The device database: one SQLite file per device, in WAL mode.
///
/// Tables: `sequences` (the JSON of each loaded version), `instances` (one row per
/// instance, keyed by its number: metadata columns, `context` = context.data as JSON,
/// `tree` = the execution tree in `TreeCodec`'s binary form, `meta` = the rest as JSON),
/// `handler_journal` (results recorded before the engine applied them), `telemetry`,
/// `sync_outbox` and `executed_commands` (used by the sync reporter). docs/workflows.md
/// shows the schema.
///
/// Tuned for a tick that rewrites many rows: a 32 MiB page cache (a cap, filled only as
/// the file grows) and a checkpoint every 8,192 WAL pages instead of SQLite's 1,000. A
/// tick rewrites the same pages again and again; checkpointing less often copies each
/// page back to the database once for several ticks (1.5x the steps/s of the default on
/// `fleetlab bench engine`; docs/benchmarks.md).
public final class SQLiteWorkflowStore: WorkflowStore {
    public let database: SQLiteDatabase
    var inTransaction = false
    /// The journal's keys, kept in memory so a lookup costs no query when there is nothing.
    var journaled: Set<InvocationKey> = []
    /// Journal keys deleted by the open transaction: forgotten in memory only on commit.
    var prunedInTransaction: [InvocationKey] = []
    /// Journal keys written by the open transaction: forgotten again on rollback.
    var journaledInTransaction: [InvocationKey] = []
    /// The last outbox write order used (continued from the file at open).
    var outboxSeq: Int64 = 0
    /// Encoding buffers reused for every write: JSON text (a snapshot's context, a
    /// journaled outcome), the tree, the meta fields.
    var jsonBytes: [UInt8] = []
    var treeBytes: [UInt8] = []
    var metaBytes: [UInt8] = []
    /// Snapshots written by the open transaction, offered as spares when it commits (by
    /// then whoever passed them in has let go), and the last commit's spares.
    var written: [InstanceSnapshot] = []
    var spares = SpareSnapshots()

    /// Version 2 keys `instances` by the instance number (the rowid) instead of its UUID
    /// text, which a snapshot update looked up in a second index.
    static let schemaVersion = 2

    static let instancesTable = """
    CREATE TABLE IF NOT EXISTS instances (
        seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, sequence_name TEXT NOT NULL, sequence_version INTEGER NOT NULL,
        state TEXT NOT NULL, dedup_key TEXT, created_ns INTEGER NOT NULL, updated_ns INTEGER NOT NULL,
        context TEXT NOT NULL, tree BLOB NOT NULL, meta TEXT NOT NULL);
    """

    /// Files written before version 2 get their instances copied into the new table.
    static let migrationToVersion2 = """
    BEGIN IMMEDIATE;
    ALTER TABLE instances RENAME TO instances_v1;
    DROP INDEX IF EXISTS instances_state;
    \(instancesTable)
    INSERT INTO instances (seq, id, sequence_name, sequence_version, state, dedup_key, created_ns, updated_ns, context, tree, meta)
        SELECT seq, id, sequence_name, sequence_version, state, dedup_key, created_ns, updated_ns, context, tree, meta FROM instances_v1;
    DROP TABLE instances_v1;
    COMMIT;
    """

    static let schema = """
    PRAGMA journal_mode = WAL;
    PRAGMA synchronous = NORMAL;
    PRAGMA cache_size = -32768;
    PRAGMA wal_autocheckpoint = 8192;
    CREATE TABLE IF NOT EXISTS sequences (
        name TEXT NOT NULL, version INTEGER NOT NULL, json TEXT NOT NULL, loaded_order INTEGER NOT NULL,
        PRIMARY KEY (name, version));
    \(instancesTable)
    CREATE TABLE IF NOT EXISTS handler_journal (
        instance_number INTEGER NOT NULL, node INTEGER NOT NULL, attempt INTEGER NOT NULL, outcome TEXT NOT NULL,
        PRIMARY KEY (instance_number, node, attempt));
    CREATE TABLE IF NOT EXISTS telemetry (
        id INTEGER PRIMARY KEY, kind TEXT NOT NULL, instance_id TEXT NOT NULL, block_id TEXT,
        detail TEXT NOT NULL, timestamp TEXT NOT NULL);
    CREATE TABLE IF NOT EXISTS sync_outbox (
        entry_type TEXT NOT NULL, entry_key TEXT NOT NULL, payload TEXT NOT NULL, seq INTEGER NOT NULL,
        PRIMARY KEY (entry_type, entry_key));
    CREATE TABLE IF NOT EXISTS executed_commands (
        command_id TEXT PRIMARY KEY, executed_ns INTEGER NOT NULL, acked INTEGER NOT NULL DEFAULT 0);
    CREATE TABLE IF NOT EXISTS sync_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    """

    public init(path: String) throws {
        database = try SQLiteDatabase(path: path)
        let version = try database.query("PRAGMA user_version").first?.first?.integer ?? 0
        let hasInstances = !(try database.query("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'instances'").isEmpty)
        if version < Self.schemaVersion && hasInstances { try database.execute(Self.migrationToVersion2) }
        try database.execute(Self.schema)
        try database.execute("PRAGMA user_version = \(Self.schemaVersion)")
        outboxSeq = try database.query("SELECT COALESCE(MAX(seq), 0) FROM sync_outbox").first?.first?.integer ?? 0
        for row in try database.query("SELECT instance_number, node, attempt FROM handler_journal") {
            let key = InvocationKey(instance: UInt64(bitPattern: row[0].integer ?? 0), node: Int32(row[1].integer ?? 0),
                                    attempt: Int16(row[2].integer ?? 0))
            journaled.insert(key)
        }
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
        spares.reset()
        for index in written.indices {
            var snapshot = MobileEngine.placeholderSnapshot
            swap(&snapshot, &written[index])
            spares.offer(consume snapshot)
        }
        written.removeAll(keepingCapacity: true)
        for key in prunedInTransaction { journaled.remove(key) }
        prunedInTransaction.removeAll()
        journaledInTransaction.removeAll()
    }

    public func rollback() {
        guard inTransaction else { return }
        try? database.execute("ROLLBACK")
        inTransaction = false
        written.removeAll(keepingCapacity: true)
        prunedInTransaction.removeAll()
        for key in journaledInTransaction { journaled.remove(key) }
        journaledInTransaction.removeAll()
    }

    public func apply(_ effect: consuming EngineEffect) throws {
        switch consume effect {
        case .persist(let snapshot):
            try persist(snapshot.instance)
            if inTransaction { written.append(snapshot) }
        case .delete(_, let number):
            try database.run("DELETE FROM instances WHERE seq = ?", [.integer(Int64(bitPattern: number))])
            try database.run("DELETE FROM handler_journal WHERE instance_number = ?", [.integer(Int64(bitPattern: number))])
            let gone = journaled.filter { $0.instance == number }
            if inTransaction { prunedInTransaction.append(contentsOf: gone) } else { journaled.subtract(gone) }
        case .storeSequence(let name, let version, let json):
            try database.run("""
                INSERT INTO sequences (name, version, json, loaded_order) VALUES (?, ?, ?, (SELECT COALESCE(MAX(loaded_order), 0) + 1 FROM sequences))
                ON CONFLICT (name, version) DO UPDATE SET json = excluded.json
                """, [.text(name), .integer(Int64(version)), .text(json)])
        case .removeSequence(let name, let version):
            try database.run("DELETE FROM sequences WHERE name = ? AND version = ?", [.text(name), .integer(Int64(version))])
        case .telemetry(let events):
            let insert = try database.statement(static:
                "INSERT INTO telemetry (kind, instance_id, block_id, detail, timestamp) VALUES (?,?,?,?,?)")
            for event in events {
                try insert.bind(event.kind.rawValue, at: 1)
                try insert.bind(event.instanceID.text, at: 2)
                if let block = event.blockID { try insert.bind(block, at: 3) } else { try insert.bindNull(at: 3) }
                try insert.bind(event.detail, at: 4)
                try insert.bind(event.timestamp, at: 5)
                try insert.execute()
            }
        case .invoke, .instanceCompleted, .instanceFailed, .stepPending:
            return
        }
    }

    /// One row per instance, rewritten whole: context as JSON (keys unsorted: parsed back,
    /// never compared), the tree in `TreeCodec`'s binary form, the rest as `meta` JSON,
    /// each encoded into a buffer kept between calls.
    func persist(_ instance: borrowing WorkflowInstance) throws {
        let upsert = try database.statement(static: """
            INSERT INTO instances (id, sequence_name, sequence_version, state, seq, dedup_key, created_ns, updated_ns, context, tree, meta)
            VALUES (?,?,?,?,?,?,?,?,?,?,?)
            ON CONFLICT (seq) DO UPDATE SET state = excluded.state, updated_ns = excluded.updated_ns,
                context = excluded.context, tree = excluded.tree, meta = excluded.meta
            """)
        var context = JSONObjectWriter(taking: &jsonBytes)
        instance.data.writeMembers(into: &context)
        jsonBytes = context.finish()
        TreeCodec.encode(instance.nodes, into: &treeBytes)
        var meta = JSONObjectWriter(taking: &metaBytes)
        instance.writeMeta(into: &meta)
        metaBytes = meta.finish()
        try upsert.bind(instance.id, at: 1)
        try upsert.bind(instance.sequenceName, at: 2)
        try upsert.bind(Int64(instance.sequenceVersion), at: 3)
        try upsert.bind(instance.state.rawValue, at: 4)
        try upsert.bind(Int64(bitPattern: instance.sequenceNumber), at: 5)
        if let dedupKey = instance.dedupKey { try upsert.bind(dedupKey, at: 6) } else { try upsert.bindNull(at: 6) }
        try upsert.bind(instance.createdAt.nanoseconds, at: 7)
        try upsert.bind(instance.updatedAt.nanoseconds, at: 8)
        try upsert.bind(holding: jsonBytes, at: 9)
        try upsert.bind(holding: treeBytes, at: 10, asBlob: true)
        try upsert.bind(holding: metaBytes, at: 11)
        try upsert.execute()
    }

    public func journal(_ key: InvocationKey, _ outcome: HandlerOutcome) throws {
        let insert = try database.statement(static:
            "INSERT OR REPLACE INTO handler_journal (instance_number, node, attempt, outcome) VALUES (?,?,?,?)")
        try insert.bind(Self.columns(of: key))
        jsonBytes.removeAll(keepingCapacity: true)
        outcome.json.write(to: &jsonBytes, sortedKeys: false)
        try insert.bind(holding: jsonBytes, at: 4)
        try insert.execute()
        if journaled.insert(key).inserted && inTransaction { journaledInTransaction.append(key) }
    }

    /// An invocation key as the journal's (instance_number, node, attempt) columns.
    static func columns(of key: InvocationKey) -> [SQLiteValue] {
        [.integer(Int64(bitPattern: key.instance)), .integer(Int64(key.node)), .integer(Int64(key.attempt))]
    }

    public func takeSpareSnapshots(into engineSpares: inout SpareSnapshots) { spares.move(into: &engineSpares) }

    public func journaledKeys() throws -> [InvocationKey] { Array(journaled) }

    public func journaledOutcome(_ key: InvocationKey) throws -> HandlerOutcome? {
        guard journaled.contains(key) else { return nil }
        let rows = try database.query("SELECT outcome FROM handler_journal WHERE instance_number = ? AND node = ? AND attempt = ?",
                                      Self.columns(of: key))
        guard let text = rows.first?.first?.text, let json = try? JSONValue.parse(text) else { return nil }
        return HandlerOutcome(json: json)
    }

    public func loadState() throws -> MobileEngine.StoredState {
        let sequences = try database.query("SELECT json FROM sequences ORDER BY loaded_order").compactMap { $0.first?.text }
        var instances: [WorkflowInstance] = []
        for row in try database.query("SELECT context, tree, meta FROM instances ORDER BY seq") {
            guard let context = row[0].text, case .blob(let tree) = row[1], let metaText = row[2].text,
                  var meta = try? JSONValue.parse(metaText).objectValue, let nodes = TreeCodec.decode(tree) else { continue }
            meta["data"] = try? JSONValue.parse(context)
            meta["nodes"] = .array(nodes.map(\.json))
            if let instance = WorkflowInstance(json: .object(meta)) { instances.append(instance) }
        }
        return MobileEngine.StoredState(sequences: sequences, instances: instances)
    }

    public func forgetJournal(_ keys: [InvocationKey]) throws {
        let present = keys.filter { journaled.contains($0) }
        guard !present.isEmpty else { return }
        let delete = { [database] () throws in
            let statement = try database.statement(static: "DELETE FROM handler_journal WHERE instance_number = ? AND node = ? AND attempt = ?")
            for key in present {
                try statement.bind(Self.columns(of: key))
                try statement.execute()
            }
        }
        if inTransaction {
            try delete()
            prunedInTransaction.append(contentsOf: present)
        } else {
            try database.transaction(delete)
            journaled.subtract(present)
        }
    }

    public func telemetry(limit: Int) throws -> [(id: Int64, event: TelemetryEvent)] {
        try database.query("SELECT id, kind, instance_id, block_id, detail, timestamp FROM telemetry ORDER BY id LIMIT ?",
                           [.integer(Int64(limit))]).compactMap { row in
            guard let kind = row[1].text.flatMap(TelemetryEvent.Kind.init), let id = row[2].text.flatMap(InstanceID.init) else { return nil }
            return (row[0].integer ?? 0, TelemetryEvent(kind: kind, instanceID: id, blockID: row[3].text,
                                                        detail: row[4].text ?? "", timestamp: row[5].text ?? ""))
        }
    }

    public func telemetryCount() throws -> Int {
        Int(try database.query("SELECT COUNT(*) FROM telemetry").first?.first?.integer ?? 0)
    }

    public func removeTelemetry(through id: Int64) throws {
        try database.run("DELETE FROM telemetry WHERE id <= ?", [.integer(id)])
    }
}
