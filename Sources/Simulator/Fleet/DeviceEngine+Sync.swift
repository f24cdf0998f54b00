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
        _read { yield process!.engine }
        _modify { yield &process!.engine }
    }

    /// The sync client of the running app, in place (none while the app is not running:
    /// what is set then is dropped with the process that is not there).
    var syncClient: SyncClient? {
        _read { yield process?.syncClient }
        _modify {
            if let process {
                yield &process.syncClient
            } else {
                var none: SyncClient?
                yield &none
            }
        }
    }

    var syncClock: Instant { clock }
    var syncWallClock: WallClockOrigin { wallClock }
    var syncHandlers: [String: BuiltinHandler] { BuiltinHandlers.all }

    func applyCommandEffects(_ effects: inout [EngineEffect]) throws {
        for effect in effects {
            switch effect {
            case .persist(let snapshot):
                try store.apply(effect)
                if snapshot.instance.parent == nil { try queueStatus(of: snapshot.instance) }
            case .delete, .storeSequence, .removeSequence, .telemetry:
                try store.apply(effect)
            case .invoke, .instanceCompleted, .instanceFailed, .stepPending:
                emitted.append(effect)
            }
        }
        effects.removeAll()
    }

    func outboxWillBeRead() throws { buildQueuedStatuses() }

    func beginBatch() throws { try store.begin() }
    func commitBatch() throws { try store.commit() }
    func rollbackBatch() { store.rollback() }
    func countDelegatedRun() { delegatedRuns += 1 }
}

extension DeviceEngine {
    /// Queues the status of an instance that just persisted, as the SDK's reporter does
    /// on every change. Building one (its step timeline as JSON) was a sixth of a
    /// workflows-and-sync run, and a device builds about five for each one it sends: a
    /// newer status takes the older one's slot before the next sync. So a running
    /// instance's status goes in as a placeholder, in its place in the outbox's order, and
    /// is built when the outbox is read, as of when it was queued. That is the same status:
    /// every change to an instance persists it and queues a new one, and the engine is
    /// there until then (a kill builds them first). A finished instance's is built at once:
    /// the engine forgets finished instances after their lifetime, perhaps before a sync.
    /// (A command's batch that rolls back, a deferred one, does so before its effects are
    /// applied, so no placeholder is queued in a batch that does not commit.)
    func queueStatus(of instance: WorkflowInstance) throws {
        if instance.state.isTerminal {
            statusesToBuild[instance.instanceID] = nil
            var driver = self
            return try driver.queueStatus(instance.instanceID)
        }
        statusesToBuild[instance.instanceID] = clock
        try store.enqueue(.status(StatusUpdate(instanceID: instance.id, sequenceName: nil, state: "", currentStep: nil, handler: nil, timestamp: "")))
    }

    /// Builds the statuses queued as placeholders, each as of when it was queued.
    func buildQueuedStatuses() {
        guard !statusesToBuild.isEmpty, isRunning else { return }
        for (id, at) in statusesToBuild {
            if let status = engine.statusUpdate(of: id, now: at) { store.completeStatus(status) }
        }
        statusesToBuild.removeAll()
    }

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
