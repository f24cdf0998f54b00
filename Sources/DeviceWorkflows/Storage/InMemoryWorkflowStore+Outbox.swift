public import LabKernel
public import Orch8Wire

extension InMemoryWorkflowStore: SyncOutboxStore {
    struct ExecutedCommand: Sendable, Equatable {
        var at: Instant
        var acked: Bool
    }

    static func outboxKey(_ kind: OutboxEntry.Kind, _ key: String) -> String { "\(kind.rawValue)|\(key)" }

    public mutating func enqueue(_ payload: OutboxPayload) throws {
        let slot = Self.outboxKey(payload.kind, payload.key)
        if payload.kind != .status, committed.outbox[slot] != nil { return }
        log(.outbox(slot, committed.outbox[slot]))
        committed.nextOutboxSeq += 1
        committed.outbox[slot] = OutboxEntry(payload: payload, seq: committed.nextOutboxSeq)
    }

    /// Puts `status` in the place of the status entry of its instance, keeping that
    /// entry's place in the order: a driver may queue a placeholder when the instance
    /// changes and build the status it stands for only if it is still there when the
    /// outbox is read (most are replaced by a newer one first). Nothing without an entry.
    public mutating func completeStatus(_ status: StatusUpdate) {
        let slot = Self.outboxKey(.status, status.instanceID)
        guard let entry = committed.outbox[slot] else { return }
        log(.outbox(slot, entry))
        committed.outbox[slot] = OutboxEntry(payload: .status(status), seq: entry.seq)
    }

    public func outbox(_ kind: OutboxEntry.Kind, limit: Int) throws -> [OutboxEntry] {
        Array(committed.outbox.values.filter { $0.kind == kind }.sorted { $0.seq < $1.seq }.prefix(limit))
    }

    public func outboxCount() throws -> Int { committed.outbox.count }

    public mutating func removeSent(_ entries: [OutboxEntry]) throws {
        for entry in entries {
            let slot = Self.outboxKey(entry.kind, entry.key)
            guard committed.outbox[slot]?.seq == entry.seq else { continue }
            log(.outbox(slot, committed.outbox[slot]))
            committed.outbox[slot] = nil
        }
        // A dictionary keeps its capacity when emptied. Most phones' outboxes are empty
        // between syncs, and the slots one burst grew (192 bytes each) would stay all day.
        if committed.outbox.isEmpty { committed.outbox = [:] }
    }

    public mutating func markExecuted(_ commandID: String, at: Instant) throws {
        log(.executed(commandID, committed.executed[commandID]))
        committed.executed[commandID] = ExecutedCommand(at: at, acked: false)
    }

    public func isExecuted(_ commandID: String) throws -> Bool { committed.executed[commandID] != nil }

    public mutating func reacknowledge(_ commandID: String) throws {
        guard var marker = committed.executed[commandID] else { return }
        log(.executed(commandID, marker))
        marker.acked = false
        committed.executed[commandID] = marker
    }

    public func pendingAcks(limit: Int) throws -> [String] {
        Array(committed.executed.filter { !$0.value.acked }.sorted { ($0.value.at, $0.key) < ($1.value.at, $1.key) }.map(\.key).prefix(limit))
    }

    public mutating func acknowledged(_ commandIDs: [String]) throws {
        for id in commandIDs {
            guard var marker = committed.executed[id], !marker.acked else { continue }
            log(.executed(id, marker))
            marker.acked = true
            committed.executed[id] = marker
        }
    }

    public mutating func pruneExecuted(before: Instant) throws {
        for (id, marker) in committed.executed where marker.acked && marker.at < before {
            log(.executed(id, marker))
            committed.executed[id] = nil
        }
        if committed.executed.isEmpty { committed.executed = [:] }
    }

    public func syncValue(_ key: String) throws -> String? { committed.syncValues[key] }

    public mutating func setSyncValue(_ key: String, _ value: String?) throws {
        log(.syncValue(key, committed.syncValues[key]))
        committed.syncValues[key] = value
    }
}
