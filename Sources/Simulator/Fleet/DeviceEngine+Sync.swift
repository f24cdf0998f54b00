import DeviceWorkflows
import Orch8Wire
import LabKernel

/// The simulated device as a sync driver: its engine and store run the same `SyncDriver`
/// code as a real device. Storage effects of a command go to the store (with a status
/// for each changed instance); the others are kept in `emitted` for the fleet to act on
/// (invocations become handler events, prompts become people).
extension DeviceEngine: SyncDriver {
    typealias Store = InMemoryWorkflowStore

    /// The live engine, in place (`_read`/`_modify`: a plain getter would copy it).
    var engine: MobileEngine {
        _read { yield live! }
        _modify { yield &live! }
    }

    var syncClock: Instant { clock }
    var syncWallClock: WallClockOrigin { wallClock }
    var syncHandlers: [String: BuiltinHandler] { BuiltinHandlers.all }

    func applyCommandEffects(_ effects: inout [EngineEffect]) throws {
        for effect in effects {
            switch effect {
            case .persist(let snapshot):
                try store.apply(effect)
                if snapshot.instance.parent == nil {
                    var driver = self
                    try driver.queueStatus(snapshot.instance.instanceID)
                }
            case .delete, .storeSequence, .removeSequence, .telemetry:
                try store.apply(effect)
            case .invoke, .instanceCompleted, .instanceFailed, .stepPending:
                emitted.append(effect)
            }
        }
        effects.removeAll()
    }

    func beginBatch() throws { try store.begin() }
    func commitBatch() throws { try store.commit() }
    func rollbackBatch() { store.rollback() }
    func countDelegatedRun() { delegatedRuns += 1 }
}

extension DeviceEngine {
    /// When this engine's sync client is next due, as an instant (for the device's work
    /// deadline): a backoff's end, at once after a push, or the due tick on the device's
    /// current tick lattice. Nil without a client, with a request in flight, or while the
    /// tick loop is stopped.
    func syncDeadline(_ fleet: Fleet, device: Int, now: Instant) -> Instant? {
        guard let client = syncClient, inFlight == nil else { return nil }
        if let until = client.nextDeadline { return max(until, now) }
        if client.forced { return now }
        let d = fleet.devices[device]
        guard d.tickLoopRunning else { return nil }
        let count = fleet.tickCount(device, at: now)
        guard client.dueTick > count else { return now }
        // The due tick, counted from the first tick after `now` on the current lattice.
        let interval = d.tickInterval(fleet.environment)
        let first = d.nextTick > now ? d.nextTick
            : Instant(nanoseconds: d.nextTick.nanoseconds + ((now - d.nextTick).nanoseconds / interval + 1) * interval)
        return Instant(nanoseconds: first.nanoseconds + Int64(client.dueTick - count - 1) * interval)
    }
}
