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
final class SyncPhone: @unchecked Sendable {
    let device: LiveDevice<InMemoryWorkflowStore>
    let sequences: [(name: String, json: String)]
    var registered = false

    init(baseURL: String, apiKey: String, deviceID: String, seed: UInt64, http: HTTPClient, requestTimeout: Duration,
         sequences: [(name: String, json: String)]) {
        let engine = MobileEngine(config: MobileEngineConfig(), handlers: BuiltinHandlers.names, seed: StreamSeed(seed), wallClock: .unixEpoch)
        let host = EngineHost(engine: engine, store: InMemoryWorkflowStore(), wallClock: .unixEpoch, now: LiveClock().now)
        device = LiveDevice(host: host, baseURL: baseURL, apiKey: apiKey, deviceID: deviceID, seed: seed, http: http)
        device.host.engine.resume()
        device.requestTimeout = requestTimeout
        self.sequences = sequences
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
    /// nil). Returns whether every request of it succeeded.
    func iterate(record: (String, String?) -> Void) async -> Bool {
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
            return report != nil
        } catch {
            record("POST /api/v1/mobile/sync", ExchangeFailure.reason(error))
            return false
        }
    }
}
