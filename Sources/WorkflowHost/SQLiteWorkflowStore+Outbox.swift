public import LabKernel
public import DeviceWorkflows
import Orch8Wire
import LabStore

extension SQLiteWorkflowStore: SyncOutboxStore {
    public func enqueue(_ payload: OutboxPayload) throws {
        outboxSeq += 1
        let verb = payload.kind == .status ? "INSERT OR REPLACE" : "INSERT OR IGNORE"
        try database.run("\(verb) INTO sync_outbox (entry_type, entry_key, payload, seq) VALUES (?, ?, ?, ?)",
                         [.text(payload.kind.rawValue), .text(payload.key), .text(payload.json.canonicalText), .integer(outboxSeq)])
    }

    /// Rows are read back typed; one that does not read is `OutboxUnreadable`, never
    /// skipped (a request without it would remove it once answered).
    public func outbox(_ kind: OutboxEntry.Kind, limit: Int) throws -> [OutboxEntry] {
        try database.query("SELECT entry_key, payload, seq FROM sync_outbox WHERE entry_type = ? ORDER BY seq LIMIT ?",
                           [.text(kind.rawValue), .integer(Int64(limit))]).map { row in
            let key = row[0].text ?? ""
            do {
                return OutboxEntry(payload: try OutboxPayload(kind: kind, json: try JSONValue.parse(row[1].text ?? "")), seq: row[2].integer ?? 0)
            } catch {
                throw OutboxUnreadable(kind: kind, key: key, reason: "\(error)")
            }
        }
    }

    public func outboxCount() throws -> Int {
        Int(try database.query("SELECT COUNT(*) FROM sync_outbox").first?.first?.integer ?? 0)
    }

    public func removeSent(_ entries: [OutboxEntry]) throws {
        guard !entries.isEmpty else { return }
        try inBatch {
            for entry in entries {
                try database.run("DELETE FROM sync_outbox WHERE entry_type = ? AND entry_key = ? AND seq = ?",
                                 [.text(entry.kind.rawValue), .text(entry.key), .integer(entry.seq)])
            }
        }
    }

    public func markExecuted(_ commandID: String, at: Instant) throws {
        try database.run("INSERT OR REPLACE INTO executed_commands (command_id, executed_ns, acked) VALUES (?, ?, 0)",
                         [.text(commandID), .integer(at.nanoseconds)])
    }

    public func isExecuted(_ commandID: String) throws -> Bool {
        !(try database.query("SELECT 1 FROM executed_commands WHERE command_id = ?", [.text(commandID)]).isEmpty)
    }

    public func reacknowledge(_ commandID: String) throws {
        try database.run("UPDATE executed_commands SET acked = 0 WHERE command_id = ?", [.text(commandID)])
    }

    public func pendingAcks(limit: Int) throws -> [String] {
        try database.query("SELECT command_id FROM executed_commands WHERE acked = 0 ORDER BY executed_ns, command_id LIMIT ?",
                           [.integer(Int64(limit))]).compactMap { $0.first?.text }
    }

    public func acknowledged(_ commandIDs: [String]) throws {
        guard !commandIDs.isEmpty else { return }
        try inBatch {
            for id in commandIDs { try database.run("UPDATE executed_commands SET acked = 1 WHERE command_id = ?", [.text(id)]) }
        }
    }

    public func pruneExecuted(before: Instant) throws {
        try database.run("DELETE FROM executed_commands WHERE acked = 1 AND executed_ns < ?", [.integer(before.nanoseconds)])
    }

    public func syncValue(_ key: String) throws -> String? {
        try database.query("SELECT value FROM sync_meta WHERE key = ?", [.text(key)]).first?.first?.text
    }

    public func setSyncValue(_ key: String, _ value: String?) throws {
        if let value {
            try database.run("INSERT OR REPLACE INTO sync_meta (key, value) VALUES (?, ?)", [.text(key), .text(value)])
        } else {
            try database.run("DELETE FROM sync_meta WHERE key = ?", [.text(key)])
        }
    }

    /// Runs `body` in the open batch, or in a transaction of its own.
    func inBatch(_ body: () throws -> Void) throws {
        if inTransaction { try body() } else { try database.transaction { try body() } }
    }
}
