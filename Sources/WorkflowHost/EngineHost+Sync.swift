public import LabKernel
public import DeviceWorkflows
public import Orch8Wire

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
        syncClient = SyncClient(config: SyncClient.Config(deviceID: deviceID), baseTickMs: engine.config.tickIntervalMs, seed: seed)
    }

    /// `onPushReceived()`: the next tick syncs.
    public mutating func pushReceived() { _ = try? sync(.pushReceived) }

    mutating func openBatch() throws { try beginBatch() }
}
