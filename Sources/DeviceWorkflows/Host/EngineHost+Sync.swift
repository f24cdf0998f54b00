public import LabKernel

/// The host as a sync driver: statuses, approvals and delegations are queued as the
/// host applies the engine's effects (see `SyncDriver` for the rules).
extension EngineHost: SyncDriver {
    public var syncClock: Instant { now }
    public var syncWallClock: WallClockOrigin { wallClock }
    public var syncHandlers: [String: BuiltinHandler] { handlers }

    public mutating func applyCommandEffects(_ effects: inout [EngineEffect]) throws { try apply(&effects) }

    public mutating func beginBatch() throws {
        if !inTransaction {
            try store.begin()
            inTransaction = true
        }
    }

    public mutating func commitBatch() throws { try commitIfNeeded() }

    public mutating func rollbackBatch() {
        store.rollback()
        inTransaction = false
    }

    public mutating func countDelegatedRun() { handlerRunCount += 1 }

    public mutating func enableSync(deviceID: String, seed: StreamSeed) {
        sync = SyncReporter(config: SyncReporter.Config(deviceID: deviceID), seed: seed)
    }

    /// `onPushReceived()`: the next tick syncs.
    public mutating func pushReceived() { sync?.forceSync() }

    /// Starts a sync if one is due at tick number `tick`; the caller sends the request and
    /// reports back with `syncSucceeded` or `syncFailed`.
    public mutating func syncIfDue(tick: UInt64) throws -> (request: SyncRequest, sent: SentBatch)? {
        guard let reporter = sync, reporter.isDue(tick: tick, now: now) else { return nil }
        let made = try makeSyncRequest()
        sync?.began()
        return made
    }

    mutating func openBatch() throws { try beginBatch() }
}

extension JSONValue {
    /// Whether any string in the value starts with `prefix`.
    func containsString(prefix: String) -> Bool {
        switch self {
        case .string(let s): return s.hasPrefix(prefix)
        case .array(let items): return items.contains { $0.containsString(prefix: prefix) }
        case .object(let fields): return fields.values.contains { $0.containsString(prefix: prefix) }
        case .null, .bool, .number: return false
        }
    }

    /// Every string in the value (keys excluded).
    var strings: Set<String> {
        switch self {
        case .string(let s): return [s]
        case .array(let items): return items.reduce(into: Set<String>()) { $0.formUnion($1.strings) }
        case .object(let fields): return fields.values.reduce(into: Set<String>()) { $0.formUnion($1.strings) }
        case .null, .bool, .number: return []
        }
    }

    func replacingStrings(in set: Set<String>, with replacement: String) -> JSONValue {
        switch self {
        case .string(let s): return set.contains(s) ? .string(replacement) : self
        case .array(let items): return .array(items.map { $0.replacingStrings(in: set, with: replacement) })
        case .object(let fields): return .object(fields.mapValues { $0.replacingStrings(in: set, with: replacement) })
        case .null, .bool, .number: return self
        }
    }
}
