import LabKernel
import Orch8Wire

/// The workflow store as plain values, for simulations of many devices. Snapshots are
/// kept as the engine's `InstanceSnapshot` objects (a persist moves a reference, it does not
/// encode or copy).
///
/// Writes go straight into the committed contents; an undo log of what each write
/// replaced lets `rollback` restore the state before `begin`. That keeps a batch O(its
/// size): staging copies of the contents would make every batch O(everything stored).
public struct InMemoryWorkflowStore: WorkflowStore, Sendable {
    struct Contents: Sendable {
        var sequences: [String: (order: Int, json: String)] = [:]
        var instances = NumberedSlots<InstanceSnapshot>()
        /// Telemetry in the batches it came in (a flush's events stay one array, stored
        /// without a copy), each with the id of its first event.
        var telemetry: [(firstID: Int64, events: [TelemetryEvent])] = []
        var nextTelemetryID: Int64 = 1
        var nextSequenceOrder = 0
        var outbox: [String: OutboxEntry] = [:]
        var nextOutboxSeq: Int64 = 0
        var executed: [String: ExecutedCommand] = [:]
        var syncValues: [String: String] = [:]
    }

    /// What a write replaced. The rare cases are boxed so an entry of the log a tick fills
    /// (a snapshot or a journal entry each) is small (24 bytes; it was 80).
    enum Undo: Sendable {
        case instance(UInt64, InstanceSnapshot?)
        indirect case sequence(String, (order: Int, json: String)?, nextOrder: Int)
        case telemetry(count: Int, nextID: Int64)
        indirect case outbox(String, OutboxEntry?)
        indirect case executed(String, ExecutedCommand?)
        indirect case syncValue(String, String?)
        case journal(JournalLog.Change)
    }

    /// Records what a write replaces, when a batch is open.
    mutating func log(_ entry: Undo) {
        if inBatch { undo.append(entry) }
    }

    var committed = Contents()
    /// The open batch's undo log; its buffer is kept between batches (a tick of ten
    /// thousand instances logs ten thousand entries, and growing it anew each time showed
    /// up as page faults).
    var undo: [Undo] = []
    var inBatch = false
    var telemetryLogged = false
    var journalLog = JournalLog()
    /// Snapshots the last commit replaced, for the engine to reuse.
    var spares = SpareSnapshots()

    public init() {}

    public mutating func begin() throws {
        if !inBatch {
            inBatch = true
            undo.removeAll(keepingCapacity: true)
            telemetryLogged = false
        }
    }

    public mutating func commit() throws {
        inBatch = false
        spares.reset()
        // The snapshots this batch replaced are no longer needed for a rollback.
        for position in undo.indices {
            var entry = Undo.telemetry(count: 0, nextID: 0)
            swap(&entry, &undo[position])
            if case .instance(_, let old?) = consume entry { spares.offer(consume old) }
        }
        undo.removeAll(keepingCapacity: true)
        journalLog.compact()
    }

    public mutating func takeSpareSnapshots(into engineSpares: inout SpareSnapshots) { spares.move(into: &engineSpares) }

    public mutating func rollback() {
        guard inBatch else { return }
        inBatch = false
        for entry in undo.reversed() {
            switch entry {
            case .instance(let number, let old): committed.instances[number] = old
            case .sequence(let key, let old, let nextOrder):
                committed.sequences[key] = old
                committed.nextSequenceOrder = nextOrder
            case .telemetry(let count, let nextID):
                committed.telemetry.removeLast(committed.telemetry.count - count)
                committed.nextTelemetryID = nextID
            case .outbox(let slot, let old): committed.outbox[slot] = old
            case .executed(let id, let old): committed.executed[id] = old
            case .syncValue(let key, let old): committed.syncValues[key] = old
            case .journal(let change): journalLog.undo(change)
            }
        }
        undo.removeAll(keepingCapacity: true)
    }

    public mutating func apply(_ effect: consuming EngineEffect) throws {
        switch consume effect {
        case .persist(let snapshot):
            let number = snapshot.instance.sequenceNumber
            let old = committed.instances.updateValue(snapshot, forKey: number)
            // Outside a batch the old snapshot is simply freed: only a commit offers spares
            // (a driver without batches, like the simulator's devices, never collects them).
            if inBatch { undo.append(.instance(number, old)) }
        case .delete(_, let number):
            let old = committed.instances.removeValue(forKey: number)
            if inBatch { undo.append(.instance(number, old)) }
            try forgetJournal(journalLog.keys.filter { $0.instance == number })
        case .storeSequence(let name, let version, let json):
            let key = "\(name)@\(version)"
            if inBatch { undo.append(.sequence(key, committed.sequences[key], nextOrder: committed.nextSequenceOrder)) }
            let order = committed.sequences[key]?.order ?? committed.nextSequenceOrder
            if committed.sequences[key] == nil { committed.nextSequenceOrder += 1 }
            committed.sequences[key] = (order, json)
        case .removeSequence(let name, let version):
            let key = "\(name)@\(version)"
            if inBatch { undo.append(.sequence(key, committed.sequences[key], nextOrder: committed.nextSequenceOrder)) }
            committed.sequences[key] = nil
        case .telemetry(let events):
            guard !events.isEmpty else { return }
            if inBatch && !telemetryLogged {
                undo.append(.telemetry(count: committed.telemetry.count, nextID: committed.nextTelemetryID))
                telemetryLogged = true
            }
            let count = Int64(events.count)
            committed.telemetry.append((committed.nextTelemetryID, events))
            committed.nextTelemetryID += count
        case .invoke, .instanceCompleted, .instanceFailed, .stepPending:
            return
        }
    }

    public mutating func journal(_ key: InvocationKey, _ outcome: HandlerOutcome) throws {
        let change = journalLog.append(key, outcome)
        if inBatch { undo.append(.journal(change)) }
    }

    public func journaledOutcome(_ key: InvocationKey) throws -> HandlerOutcome? { journalLog.outcome(key) }

    public func journaledKeys() throws -> [InvocationKey] { journalLog.keys }

    public mutating func forgetJournal(_ keys: [InvocationKey]) throws {
        defer { if !inBatch { journalLog.compact() } }
        for key in keys {
            guard let change = journalLog.forget(key) else { continue }
            if inBatch { undo.append(.journal(change)) }
        }
    }

    public func loadState() throws -> MobileEngine.StoredState {
        MobileEngine.StoredState(
            sequences: committed.sequences.values.sorted { $0.order < $1.order }.map(\.json),
            instances: committed.instances.values.map(\.instance))
    }

    public func telemetry(limit: Int) throws -> [(id: Int64, event: TelemetryEvent)] {
        var out: [(id: Int64, event: TelemetryEvent)] = []
        for batch in committed.telemetry {
            for (offset, event) in batch.events.enumerated() {
                guard out.count < limit else { return out }
                out.append((batch.firstID + Int64(offset), event))
            }
        }
        return out
    }

    public func telemetryCount() throws -> Int { committed.telemetry.reduce(0) { $0 + $1.events.count } }

    public mutating func removeTelemetry(through id: Int64) throws {
        let spent = committed.telemetry.prefix { $0.firstID + Int64($0.events.count) - 1 <= id }.count
        committed.telemetry.removeFirst(spent)
        if let first = committed.telemetry.first, first.firstID <= id {
            let drop = Int(id - first.firstID + 1)
            committed.telemetry[0] = (id + 1, Array(first.events.dropFirst(drop)))
        }
    }

    /// Instances stored (for tests and reports).
    public var storedInstanceCount: Int { committed.instances.count }
    public var journalCount: Int { journalLog.count }
}
