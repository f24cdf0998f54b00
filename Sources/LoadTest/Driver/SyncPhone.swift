import Foundation
import DeviceWorkflows
import LabKernel
import Live
import Orch8Wire
import WorkflowHost

/// A virtual phone of a load test on the sync stack: the same engine and sync client
/// cores as the simulator's phones and `fleetlab device`, on real sockets, its store in
/// memory. Its first iteration registers it, loads the scenario's sequences and starts
/// one instance of each (so its syncs carry statuses and approvals like a phone's); every
/// iteration after that advances its engine and syncs.
///
/// With `relaunchShare` (`--relaunch`) its app is killed after an iteration with that
/// chance: the engine and the sync client, which live in the app's memory, go; the store,
/// what the app persisted (instances, outbox, executed commands), stays. The next iteration
/// launches it again, as the simulator's phones come back: the engine restored from the
/// store (`EngineHost.relaunch`), a new sync client, then its sync, which sends again what
/// the server had not acknowledged (`loadtest.sync_relaunch`: from the launch until that
/// sync is answered). Registration is stored too: a relaunched app does not register again.
final class SyncPhone: @unchecked Sendable {
    private(set) var device: LiveDevice<InMemoryWorkflowStore>
    let sequences: [(name: String, json: String)]
    var registered = false
    let relaunchShare: Ratio
    /// Whether each iteration ends with an app kill.
    var kills: SeededGenerator
    /// The app was killed; the next iteration launches it.
    var killed = false
    var launches: UInt64 = 0
    let seed: UInt64
    let http: HTTPClient

    init(baseURL: String, apiKey: String, deviceID: String, seed: UInt64, http: HTTPClient, requestTimeout: Duration,
         sequences: [(name: String, json: String)], relaunchShare: Ratio = .zero) {
        let engine = MobileEngine(config: MobileEngineConfig(), handlers: BuiltinHandlers.names, seed: StreamSeed(seed), wallClock: .unixEpoch)
        let host = EngineHost(engine: engine, store: InMemoryWorkflowStore(), wallClock: .unixEpoch, now: LiveClock().now)
        device = LiveDevice(host: host, baseURL: baseURL, apiKey: apiKey, deviceID: deviceID, seed: seed, http: http)
        device.host.engine.resume()
        device.requestTimeout = requestTimeout
        self.sequences = sequences
        self.relaunchShare = relaunchShare
        self.seed = seed
        self.http = http
        kills = StreamSeed(seed).child("kills").generator()
    }

    /// The app is launched again from what it stored: the engine restored, a sync client
    /// of its own (its `seed`'s launch-th stream).
    func relaunch() throws {
        launches += 1
        let old = device, launch = StreamSeed(seed).child("launch").child(launches)
        var host = try EngineHost.relaunch(config: MobileEngineConfig(), store: old.host.store, seed: launch.child("engine"), now: LiveClock().now,
                                           wallClock: .unixEpoch)
        host.engine.resume()
        var syncSeed = launch.child("sync").generator()
        device = LiveDevice(host: host, baseURL: old.baseURL, apiKey: old.apiKey, deviceID: old.deviceID, seed: syncSeed.next(), http: http)
        device.requestTimeout = old.requestTimeout
        killed = false
    }

    /// The power state the phone's engine runs in (what labels its sync cadence).
    var powerState: PowerState { device.host.engine.powerState }

    /// How long the engine waits between ticks in its power state.
    var tickInterval: TimeSpan { device.host.engine.tickInterval }

    /// One tick as the app runs it: register first, then advance the engine and sync if
    /// the sync client says one is due. Returns nil when no request went out, else whether
    /// it succeeded.
    func tick(record: (String, String?) -> Void) async -> Bool? {
        guard registered else { return await iterate(record: record) }
        do {
            try device.step()
            switch try await device.syncWhenDue() {
            case .notDue: return nil
            case .failed:
                record("POST /api/v1/mobile/sync", device.lastSyncFailure ?? "not applied")
                return false
            case .synced:
                record("POST /api/v1/mobile/sync", nil)
                return true
            }
        } catch {
            record("POST /api/v1/mobile/sync", ExchangeFailure.reason(error))
            return false
        }
    }

    /// One iteration; reports each request to `record` (its endpoint, and why it failed or
    /// nil), and a relaunch's time to `relaunched`. Returns whether every request of it
    /// succeeded.
    func iterate(record: (String, String?) -> Void, relaunched: (Duration) -> Void = { _ in }) async -> Bool {
        var launchedAt: ContinuousClock.Instant?
        if killed {
            launchedAt = ContinuousClock.now
            do { try relaunch() } catch {
                // The store is the app's own: one it cannot read back is a bug, counted as a
                // failed sync under one reason (not the error's text: a label per message).
                record("POST /api/v1/mobile/sync", "relaunch failed")
                return false
            }
        }
        defer { if relaunchShare.numerator > 0 && kills.chance(relaunchShare) { killed = true } }
        if !registered {
            do {
                try await device.register(platform: "android", pushToken: nil, appVersion: "fleetlab-loadtest")
                registered = true
                record("POST /api/v1/mobile/devices/register", nil)
            } catch {
                record("POST /api/v1/mobile/devices/register", ExchangeFailure.reason(error))
                return false
            }
            for sequence in sequences {
                // A sequence the engine refuses is the scenario's problem, found when it loaded.
                _ = try? device.host.loadSequence(json: sequence.json)
                _ = try? device.host.start(sequence.name)
            }
        }
        do {
            try device.step()
            let report = try await device.syncNow()
            record("POST /api/v1/mobile/sync", report == nil ? device.lastSyncFailure ?? "not applied" : nil)
            if report != nil, let launchedAt { relaunched(ContinuousClock.now - launchedAt) }
            return report != nil
        } catch {
            record("POST /api/v1/mobile/sync", ExchangeFailure.reason(error))
            return false
        }
    }
}
