public import LabKernel
public import Orch8Wire

/// Where a device keeps its workflow state: sequences, instance snapshots (context and
/// execution tree), the handler-result journal, telemetry and the sync outbox.
///
/// Two implementations pass one conformance suite: `SQLiteWorkflowStore` (the device
/// database file) and `InMemoryWorkflowStore` (compact, for fleet-scale simulation, where
/// it plays the part of the phone's disk: it survives an app kill, the engine does not).
///
/// Storage effects are applied inside `begin`/`commit`; a crash before `commit` loses the
/// whole batch, never part of it. Journal writes and deletes may be part of a batch (the
/// host journals one tick's results together, and forgets them with the snapshots that
/// consumed them) or stand alone.
public protocol WorkflowStore: SyncOutboxStore {
    mutating func begin() throws
    mutating func commit() throws
    mutating func rollback()
    /// Applies a storage effect (`persist`, `delete`, `storeSequence`, `removeSequence`,
    /// `telemetry`); other effects are not the store's business and are ignored. The
    /// effect is consumed, so a snapshot moves into the store without a copy.
    mutating func apply(_ effect: consuming EngineEffect) throws
    /// Records a handler's result durably, before the engine hears of it. A key is
    /// journaled at most once before it is forgotten (a host dispatches each key once).
    mutating func journal(_ key: InvocationKey, _ outcome: HandlerOutcome) throws
    func journaledOutcome(_ key: InvocationKey) throws -> HandlerOutcome?
    /// Every journaled key (a relaunched host looks up only these).
    func journaledKeys() throws -> [InvocationKey]
    /// Drops journaled results whose effect on the instance has been committed.
    mutating func forgetJournal(_ keys: [InvocationKey]) throws
    /// Hands over the snapshots the store let go of at its last commit, for the
    /// engine's next flushes to reuse (see `SpareSnapshots`).
    mutating func takeSpareSnapshots(into engineSpares: inout SpareSnapshots)
    /// Everything the engine needs after a restart.
    func loadState() throws -> MobileEngine.StoredState
    /// Telemetry recorded and not yet flushed, oldest first, with their ids.
    func telemetry(limit: Int) throws -> [(id: Int64, event: TelemetryEvent)]
    /// How many recorded events wait to be sent.
    func telemetryCount() throws -> Int
    mutating func removeTelemetry(through id: Int64) throws
}

extension HandlerOutcome {
    /// `{"ok": output}`, `{"retry": message}` or `{"fail": message}`.
    package var json: JSONValue {
        switch self {
        case .success(let output): return ["ok": output]
        case .retryable(let message): return ["retry": .string(message)]
        case .permanent(let message): return ["fail": .string(message)]
        }
    }

    package init?(json: JSONValue) {
        if let ok = json["ok"] { self = .success(ok) }
        else if let message = json["retry"]?.stringValue { self = .retryable(message) }
        else if let message = json["fail"]?.stringValue { self = .permanent(message) }
        else { return nil }
    }
}

