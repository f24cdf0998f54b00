public import LabKernel

/// The workflow store as plain values, for simulations of many devices. Snapshots are
/// kept as structs (copy-on-write, so a persist is a reference bump, not an encode).
public struct InMemoryWorkflowStore: WorkflowStore, Sendable {
    struct Contents: Sendable {
        var sequences: [String: (order: Int, json: String)] = [:]
        var instances: [String: WorkflowInstance] = [:]
        var telemetry: [(id: Int64, event: TelemetryEvent)] = []
        var nextTelemetryID: Int64 = 1
        var nextSequenceOrder = 0
    }

    var committed = Contents()
    /// Effects of the open batch, applied to `committed` on commit (staging a list keeps a
    /// batch O(its size); copying the contents would make it O(everything stored)).
    var staged: [EngineEffect]?
    var journalEntries: [InvocationKey: HandlerOutcome] = [:]

    public init() {}

    public mutating func begin() throws {
        if staged == nil { staged = [] }
    }

    public mutating func commit() throws {
        guard let batch = staged else { return }
        staged = nil
        for effect in batch { write(effect) }
    }

    public mutating func rollback() { staged = nil }

    public mutating func apply(_ effect: EngineEffect) throws {
        if staged != nil {
            staged!.append(effect)
        } else {
            write(effect)
        }
    }

    mutating func write(_ effect: EngineEffect) {
        switch effect {
        case .persist(let instance):
            committed.instances[instance.id] = instance
            let keys = journalEntries.keys.filter { $0.instanceID == instance.id }
            for key in staleJournalKeys(Array(keys), for: instance) { journalEntries[key] = nil }
        case .delete(let id):
            committed.instances[id] = nil
            for key in journalEntries.keys where key.instanceID == id { journalEntries[key] = nil }
        case .storeSequence(let name, let version, let json):
            let key = "\(name)@\(version)"
            let order = committed.sequences[key]?.order ?? committed.nextSequenceOrder
            if committed.sequences[key] == nil { committed.nextSequenceOrder += 1 }
            committed.sequences[key] = (order, json)
        case .removeSequence(let name, let version):
            committed.sequences["\(name)@\(version)"] = nil
        case .telemetry(let event):
            committed.telemetry.append((committed.nextTelemetryID, event))
            committed.nextTelemetryID += 1
        case .invoke, .instanceCompleted, .instanceFailed, .stepPending:
            return
        }
    }

    public mutating func journal(_ key: InvocationKey, _ outcome: HandlerOutcome) throws {
        journalEntries[key] = outcome
    }

    public func journaledOutcome(_ key: InvocationKey) throws -> HandlerOutcome? { journalEntries[key] }

    public func loadState() throws -> MobileEngine.StoredState {
        MobileEngine.StoredState(
            sequences: committed.sequences.values.sorted { $0.order < $1.order }.map(\.json),
            instances: committed.instances.values.sorted { $0.sequenceNumber < $1.sequenceNumber })
    }

    public func telemetry(limit: Int) throws -> [(id: Int64, event: TelemetryEvent)] {
        Array(committed.telemetry.prefix(limit))
    }

    public mutating func removeTelemetry(through id: Int64) throws {
        committed.telemetry.removeAll { $0.id <= id }
    }

    /// Instances stored (for tests and reports).
    public var storedInstanceCount: Int { committed.instances.count }
    public var journalCount: Int { journalEntries.count }
}
