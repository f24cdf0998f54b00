public import LabStore
public import MobileSyncServer

/// What a sync server sets aside (`SyncHistoryArchive`): finished statuses, closed
/// approvals and acknowledged commands, in a temporary SQLite file (`ArchiveFile`).
///
/// The tables are indexed for what a sync asks (a status by its instance, an approval by
/// its gate) and for retention's sweeps (by creation and acknowledgement time). The
/// listings by tenant read the whole table: an operator's dashboard lists them, and the
/// simulator, the only driver with an archive, has no dashboard.
///
/// One simulated world owns an archive and calls it from one thread at a time, as its
/// server core does (hence `@unchecked Sendable`). A failed write is kept (`failure`),
/// and later calls do nothing.
public final class SQLiteSyncArchive: SyncHistoryArchive, @unchecked Sendable {
    let file: ArchiveFile
    public var failure: String? { file.failure }

    public init() throws(SQLiteError) {
        file = try ArchiveFile("the sync server's archive", schema: """
            CREATE TABLE statuses (device TEXT NOT NULL, instance TEXT NOT NULL, tenant TEXT NOT NULL, sequence_name TEXT,
                                   state TEXT NOT NULL, current_step TEXT, handler TEXT, context_summary TEXT, steps TEXT,
                                   updated_at INTEGER NOT NULL, reported_at INTEGER NOT NULL,
                                   PRIMARY KEY (device, instance)) WITHOUT ROWID;
            CREATE TABLE approvals (id TEXT PRIMARY KEY, device TEXT NOT NULL, tenant TEXT NOT NULL, instance TEXT NOT NULL,
                                    block_id TEXT NOT NULL, sequence_name TEXT, prompt TEXT, choices TEXT, store_as TEXT,
                                    timeout_secs INTEGER, metadata TEXT, state TEXT NOT NULL, resolution TEXT,
                                    created_at INTEGER NOT NULL, resolved_at INTEGER);
            CREATE INDEX approvals_by_gate ON approvals (device, instance, block_id);
            CREATE INDEX approvals_by_creation ON approvals (created_at);
            CREATE TABLE commands (id TEXT PRIMARY KEY, sequence INTEGER NOT NULL, device TEXT NOT NULL, tenant TEXT NOT NULL,
                                   type TEXT NOT NULL, payload TEXT NOT NULL, created_at INTEGER NOT NULL, acked_at INTEGER NOT NULL);
            CREATE INDEX commands_by_ack ON commands (acked_at);
            """)
    }

    /// How many rows of each kind are set aside.
    public var counts: (statuses: Int, approvals: Int, commands: Int) {
        (file.count("statuses"), file.count("approvals"), file.count("commands"))
    }

    // MARK: Statuses

    static let statusColumns = "device, instance, tenant, sequence_name, state, current_step, handler, context_summary, steps, updated_at, reported_at"

    public func put(_ status: StatusRecord) {
        file.attempt {
            try file.run("INSERT OR REPLACE INTO statuses (\(Self.statusColumns)) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", [
                .text(status.deviceID), .text(status.instanceID), .text(status.tenantID), .textOrNull(status.sequenceName),
                .text(status.state), .textOrNull(status.currentStep), .textOrNull(status.handler), .textOrNull(status.contextSummary),
                .textOrNull(status.steps), .integer(status.updatedAtMs), .integer(status.reportedAtMs),
            ])
        }
    }

    public func status(device: String, instance: String) -> StatusRecord? {
        statuses("WHERE device = ? AND instance = ?", [.text(device), .text(instance)]).first
    }

    public func removeStatus(device: String, instance: String) {
        file.attempt { try file.run("DELETE FROM statuses WHERE device = ? AND instance = ?", [.text(device), .text(instance)]) }
    }

    public func statuses(device: String) -> [StatusRecord] { statuses("WHERE device = ?", [.text(device)]) }

    public func newestStatuses(_ limit: Int, tenant: String?) -> [StatusRecord] {
        statuses("\(tenant == nil ? "" : "WHERE tenant = ?") ORDER BY reported_at DESC, instance DESC, device DESC LIMIT ?",
                 (tenant.map { [.text($0)] } ?? []) + [.integer(Int64(limit))])
    }

    public func statusCount(tenant: String?) -> Int { count("statuses", tenant: tenant, state: nil) }

    private func statuses(_ clauses: String, _ bindings: [SQLiteValue]) -> [StatusRecord] {
        file.attempt {
            try file.rows("SELECT \(Self.statusColumns) FROM statuses \(clauses)", bindings) { row in
                StatusRecord(deviceID: row.string(at: 0) ?? "", tenantID: row.string(at: 2) ?? "", instanceID: row.string(at: 1) ?? "",
                             sequenceName: row.string(at: 3), state: row.string(at: 4) ?? "", currentStep: row.string(at: 5),
                             handler: row.string(at: 6), contextSummary: row.string(at: 7), steps: row.string(at: 8),
                             updatedAtMs: row.int64(at: 9), reportedAtMs: row.int64(at: 10))
            }
        } ?? []
    }

    // MARK: Approvals

    static let approvalColumns = """
        id, device, tenant, instance, block_id, sequence_name, prompt, choices, store_as, timeout_secs, metadata, state, resolution,
        created_at, resolved_at
        """

    public func put(_ approval: ApprovalRecord) {
        file.attempt {
            try file.run("INSERT OR REPLACE INTO approvals (\(Self.approvalColumns)) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", [
                .text(approval.id), .text(approval.deviceID), .text(approval.tenantID), .text(approval.instanceID), .text(approval.blockID),
                .textOrNull(approval.sequenceName), .textOrNull(approval.prompt), .textOrNull(approval.choices), .textOrNull(approval.storeAs),
                .integerOrNull(approval.timeoutSecs.map(Int64.init)), .textOrNull(approval.metadata), .text(approval.state.rawValue),
                .textOrNull(approval.resolution), .integer(approval.createdAtMs), .integerOrNull(approval.resolvedAtMs),
            ])
        }
    }

    public func approval(_ id: String) -> ApprovalRecord? { approvals("WHERE id = ?", [.text(id)]).first }

    public func approval(device: String, instance: String, block: String) -> ApprovalRecord? {
        approvals("WHERE device = ? AND instance = ? AND block_id = ? LIMIT 1", [.text(device), .text(instance), .text(block)]).first
    }

    public func approvals(device: String) -> [ApprovalRecord] { approvals("WHERE device = ?", [.text(device)]) }

    public func oldestApprovals(_ limit: Int, tenant: String?, state: ApprovalRecord.State?) -> [ApprovalRecord] {
        let (filter, bindings) = Self.filter(tenant: tenant, state: state)
        return approvals("\(filter) ORDER BY created_at, id LIMIT ?", bindings + [.integer(Int64(limit))])
    }

    public func approvalCount(tenant: String?, state: ApprovalRecord.State?) -> Int { count("approvals", tenant: tenant, state: state) }

    public func removeApprovals(createdBefore createdAtMs: Int64) -> [String] {
        remove("approvals", where: "created_at < ?", createdAtMs)
    }

    private func approvals(_ clauses: String, _ bindings: [SQLiteValue]) -> [ApprovalRecord] {
        file.attempt {
            try file.rows("SELECT \(Self.approvalColumns) FROM approvals \(clauses)", bindings) { row in
                ApprovalRecord(id: row.string(at: 0) ?? "", deviceID: row.string(at: 1) ?? "", tenantID: row.string(at: 2) ?? "",
                               instanceID: row.string(at: 3) ?? "", blockID: row.string(at: 4) ?? "", sequenceName: row.string(at: 5),
                               prompt: row.string(at: 6), choices: row.string(at: 7), storeAs: row.string(at: 8),
                               timeoutSecs: row.optionalInt64(at: 9).map { Int($0) }, metadata: row.string(at: 10),
                               state: ApprovalRecord.State(rawValue: row.string(at: 11) ?? "") ?? .expired, resolution: row.string(at: 12),
                               createdAtMs: row.int64(at: 13), resolvedAtMs: row.optionalInt64(at: 14))
            }
        } ?? []
    }

    // MARK: Commands

    public func put(_ command: CommandRecord) {
        file.attempt {
            try file.run("""
                INSERT OR REPLACE INTO commands (id, sequence, device, tenant, type, payload, created_at, acked_at)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                """, [.text(command.id), .integer(command.sequence), .text(command.deviceID), .text(command.tenantID), .text(command.type),
                      .text(command.payloadText), .integer(command.createdAtMs), .integer(command.ackedAtMs ?? command.createdAtMs)])
        }
    }

    public func removeCommands(ackedBefore ackedAtMs: Int64) -> [String] {
        remove("commands", where: "acked_at < ?", ackedAtMs)
    }

    // MARK: Shared

    /// A `WHERE` clause for a tenant and a state, either of them any when nil.
    private static func filter(tenant: String?, state: ApprovalRecord.State?) -> (String, [SQLiteValue]) {
        let terms = [tenant.map { ("tenant = ?", SQLiteValue.text($0)) }, state.map { ("state = ?", SQLiteValue.text($0.rawValue)) }].compactMap { $0 }
        return (terms.isEmpty ? "" : "WHERE " + terms.map(\.0).joined(separator: " AND "), terms.map(\.1))
    }

    private func count(_ table: String, tenant: String?, state: ApprovalRecord.State?) -> Int {
        let (filter, bindings) = Self.filter(tenant: tenant, state: state)
        return file.count(table, filter, bindings)
    }

    /// Deletes the rows of `table` that `condition` (with one integer) picks; their ids.
    private func remove(_ table: String, where condition: String, _ value: Int64) -> [String] {
        file.attempt {
            let ids = try file.rows("SELECT id FROM \(table) WHERE \(condition)", [.integer(value)]) { $0.string(at: 0) ?? "" }
            if !ids.isEmpty { try file.run("DELETE FROM \(table) WHERE \(condition)", [.integer(value)]) }
            return ids
        } ?? []
    }
}
