import DeviceWorkflows
import Foundation
import LabKernel
import LabTestSupport
import Live
import MobileSyncServer
import Orch8Wire
import Synchronization
import Testing
import WorkflowHost

/// The orch8 sync server as a device and an operator see it, one test body run on both
/// drivers: the server core in process (its requests answered by a function call) and
/// `fleetlab serve` on a real socket. A difference between the two is a bug in a driver.
@Suite("Conformance: orch8 sync on both drivers", .serialized)
struct SyncConformanceTests {
    enum Driver: String, CaseIterable, Sendable {
        case simulated, loopback
    }

    /// A server on one driver, and a transport to it that can be cut.
    final class Lab: @unchecked Sendable {
        let baseURL: String
        let rootKey: String
        let inner: any HTTPTransport
        let down = Switch()
        var served: ServedFleetlab?

        init(_ driver: Driver) async throws {
            switch driver {
            case .simulated:
                let clock = LiveClock()
                baseURL = "http://127.0.0.1:7710"
                var core = SyncServer(config: SyncServerConfig(authRequired: true, baseURL: baseURL), seed: StreamSeed(41), wallClock: .unixEpoch)
                rootKey = core.bootstrap(now: clock.now)
                _ = core.state.takeChanges()
                let server = Mutex(core)
                inner = InProcessTransport { request in server.withLock { $0.handle(request, now: clock.now).response } }
            case .loopback:
                let served = try await ServedFleetlab.start(data: TestPaths.scratchDirectory("conformance-sync").path)
                self.served = served
                baseURL = served.syncURL
                rootKey = served.rootKey
                inner = HTTPClient().transport(to: baseURL)
            }
        }

        /// The device's way to the server; throws while `down`.
        var transport: some HTTPTransport { InProcessCut(inner: inner, down: down) }

        func api(_ method: String, _ path: String, _ body: JSONValue? = nil) async throws -> HTTPResponseMessage {
            var bytes: [UInt8] = []
            body?.write(to: &bytes)
            return try await inner.send(HTTPRequestMessage(method: method, target: path, headers: ["x-api-key": rootKey, "content-type": "application/json"],
                                                           body: bytes), timeout: .seconds(60))
        }

        func device(_ name: String) throws -> LiveDevice<SQLiteWorkflowStore> {
            var config = MobileEngineConfig()
            config.tickIntervalMs = 100
            let engine = MobileEngine(config: config, handlers: BuiltinHandlers.names, seed: StreamSeed(7), wallClock: .unixEpoch)
            let store = try SQLiteWorkflowStore(path: TestPaths.scratchDirectory("conformance-device").appendingPathComponent("\(name).sqlite").path)
            let device = LiveDevice(host: EngineHost(engine: engine, store: store, wallClock: .unixEpoch), baseURL: baseURL, apiKey: rootKey,
                                    deviceID: name, transport: transport)
            device.host.engine.resume()
            device.requestTimeout = .seconds(120)
            return device
        }

        deinit { served?.stop() }
    }

    final class Switch: Sendable {
        let isDown = Mutex(false)
        func set(_ value: Bool) { isDown.withLock { $0 = value } }
    }

    /// A transport that fails at once while its switch is down (the phone's radio is off).
    struct InProcessCut: HTTPTransport {
        let inner: any HTTPTransport
        let down: Switch

        struct Unreachable: Error {}

        func send(_ request: HTTPRequestMessage, timeout: Duration) async throws -> HTTPResponseMessage {
            if down.isDown.withLock({ $0 }) { throw Unreachable() }
            return try await inner.send(request, timeout: timeout)
        }
    }

    @Test("register, approval round trip, offline outbox, telemetry, campaign dedup and a manifest update", arguments: Driver.allCases)
    func deviceAndOperator(driver: Driver) async throws {
        let lab = try await Lab(driver)
        let device = try lab.device("phone-\(driver.rawValue)")
        try await device.register(pushToken: "tok")
        _ = try device.host.loadSequence(json: workflowJSON("payment-verification"))

        // Approval round trip: the device reports and waits, the operator decides.
        let first = try device.host.start("payment-verification")
        try device.step()
        #expect(try await device.syncNow() != nil)
        let pending = try await lab.api("GET", "/api/v1/mobile/approvals?state=pending").jsonBody?["items"]?.arrayValue ?? []
        let approval = try #require(pending.first { $0["instance_id"]?.stringValue == first }?["id"]?.stringValue)
        #expect(try await lab.api("POST", "/api/v1/mobile/approvals/\(approval)/resolve", ["output": ["value": "approved"]]).status == 200)
        #expect(try await device.syncNow()?.applied.count == 1)
        try device.step()
        #expect(device.host.engine.instance(first)?.state == .completed)
        try await device.syncNow()
        let statuses = try await lab.api("GET", "/api/v1/mobile/status?device_id=phone-\(driver.rawValue)").jsonBody?["items"]?.arrayValue ?? []
        #expect(statuses.first { $0["instance_id"]?.stringValue == first }?["state"] == "Completed")
        let events = try await lab.api("GET", "/api/v1/mobile/devices/phone-\(driver.rawValue)/telemetry?limit=200").jsonBody
        #expect((events?["total"]?.numberValue ?? 0) > 0, "the engine's telemetry went up with the syncs")

        // Offline: nothing is lost; the first sync back drains the outbox.
        lab.down.set(true)
        let second = try device.host.start("payment-verification")
        try device.step()
        #expect(try await device.syncNow() == nil && device.host.syncClient?.failures == 1)
        #expect(try device.host.store.outboxCount() >= 2)
        lab.down.set(false)
        #expect(try await device.syncNow() != nil)
        #expect(try device.host.store.outboxCount() == 0)
        let waiting = try await lab.api("GET", "/api/v1/mobile/approvals?state=pending").jsonBody?["items"]?.arrayValue ?? []
        #expect(waiting.contains { $0["instance_id"]?.stringValue == second })

        // A rollout sent twice with one dedup key starts once.
        let command: JSONValue = ["device_id": .string("phone-\(driver.rawValue)"), "command_type": "start_workflow",
                                  "payload": ["sequence_name": "payment-verification", "dedup_key": "rollout-1"]]
        for _ in 0..<2 { #expect(try await lab.api("POST", "/api/v1/mobile/commands", command).status == 201) }
        let before = device.host.engine.allInstances.count
        let report = try #require(try await device.syncNow())
        #expect(report.applied.count == 2 && device.host.engine.allInstances.count == before + 1)

        // A manifest update: publish v2, the device verifies and loads it.
        let root = try await lab.api("GET", "/api/v1/mobile/manifest/root-key").jsonBody?["public_key"]?.stringValue ?? ""
        var config = device.host.engine.config
        config.rootPublicKey = root
        device.host.engine = MobileEngine(config: config, handlers: BuiltinHandlers.names, seed: StreamSeed(8), wallClock: .unixEpoch)
        var v2 = try JSONValue.parse(workflowJSON("payment-verification")).objectValue ?? [:]
        v2["version"] = 2
        #expect(try await lab.api("POST", "/api/v1/mobile/manifest/sequences", ["sequence": .object(v2)]).status == 201)
        let result = try await device.syncManifest(tenant: "_")
        #expect(result.added == 1 && result.signatureFailures == 0, "\(result)")
        #expect(device.host.engine.sequence(named: "payment-verification")?.version == 2)
    }
}
