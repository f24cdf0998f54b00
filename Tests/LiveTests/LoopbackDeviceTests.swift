import DeviceWorkflows
import WorkflowHost
import Orch8Wire
import Foundation
import LabKernel
import LabTestSupport
import Testing
@testable import Live

/// A real device core (SQLite store, real HTTP) against `fleetlab serve`.
@Suite("Loopback: a device against fleetlab serve", .serialized)
struct LoopbackDeviceTests {
    static func device(_ url: String, key: String, dir: URL, rootKey: String = "") throws -> LiveDevice<SQLiteWorkflowStore> {
        var config = MobileEngineConfig()
        config.tickIntervalMs = 100
        config.rootPublicKey = rootKey
        // A real device: instants are wall-clock time since the Unix epoch (LiveClock's).
        let wall = WallClockOrigin.unixEpoch
        var engine = MobileEngine(config: config, handlers: BuiltinHandlers.names, seed: StreamSeed(21), wallClock: wall)
        engine.resume()
        let store = try SQLiteWorkflowStore(path: dir.appendingPathComponent("device.sqlite").path)
        let device = LiveDevice(host: EngineHost(engine: engine, store: store, wallClock: wall), baseURL: url, apiKey: key, deviceID: "pixel-7")
        // The suite runs simulations on the same two cooperative threads these async tests
        // resume on; a request can wait its turn for a thread longer than a real one waits
        // for a server. The deadline stays; it is just longer here.
        device.requestTimeout = .seconds(120)
        return device
    }

    func get(_ url: String, key: String) async throws -> JSONValue {
        let reply = try await HTTPProbe.request("GET", url, headers: ["x-api-key": key])
        return try JSONValue.parse(reply.text)
    }

    @Test("approval round trip, a partition (server stopped and restarted) and a manifest update")
    func loopback() async throws {
        let data = TestPaths.scratchDirectory("loopback-serve").path
        let port = try ServedFleetlab.freePort()
        var served = try await ServedFleetlab.start(syncPort: port, data: data)
        let url = served.syncURL, key = served.rootKey
        let rootPublic = try await get(url + "/api/v1/mobile/manifest/root-key", key: key)["public_key"]?.stringValue ?? ""
        let device = try Self.device(url, key: key, dir: TestPaths.scratchDirectory("loopback-device"), rootKey: rootPublic)
        try await device.register(pushToken: "fcm-1")
        _ = try device.host.loadSequence(json: workflowJSON("payment-verification"))

        // 1. Approval round trip.
        let first = try device.host.start("payment-verification")
        try device.step()
        #expect(try await device.syncNow() != nil)
        let approvals = try await get(url + "/api/v1/mobile/approvals?state=pending", key: key)["items"]?.arrayValue ?? []
        let approval = try #require(approvals.first { $0["instance_id"]?.stringValue == first }?["id"]?.stringValue)
        let resolved = try await HTTPProbe.request("POST", url + "/api/v1/mobile/approvals/\(approval)/resolve",
                                                   body: Data(#"{"output":{"value":"approved"}}"#.utf8), headers: ["x-api-key": key])
        #expect(resolved.status == 200)
        #expect(try await device.syncNow()?.applied.count == 1)
        try device.step()
        #expect(device.host.engine.instance(first)?.state == .completed)
        try await device.syncNow()
        let status = try await get(url + "/api/v1/mobile/status?device_id=pixel-7", key: key)["items"]?.arrayValue ?? []
        #expect(status.first { $0["instance_id"]?.stringValue == first }?["state"] == "Completed")

        // 2. Partition: the server goes away; the device works on, loses nothing.
        served.stop()
        let second = try device.host.start("payment-verification")
        try device.step()
        #expect(try await device.syncNow() == nil, "the sync fails while the server is down")
        #expect(try device.host.store.outboxCount() >= 2)
        served = try await ServedFleetlab.start(syncPort: port, data: data)
        #expect(served.rootKey == key, "the restarted server kept its state")
        #expect(try await device.syncNow() != nil)
        #expect(try device.host.store.outboxCount() == 0)
        let pending = try await get(url + "/api/v1/mobile/approvals?state=pending", key: key)["items"]?.arrayValue ?? []
        #expect(pending.contains { $0["instance_id"]?.stringValue == second })

        // 3. Manifest update: publish v2, the device verifies and loads it.
        var v2 = try JSONValue.parse(workflowJSON("payment-verification")).objectValue ?? [:]
        v2["version"] = 2
        let published = try await HTTPProbe.request("POST", url + "/api/v1/mobile/manifest/sequences",
                                                     body: Data(JSONValue.object(["sequence": .object(v2)]).canonicalText.utf8),
                                                     headers: ["x-api-key": key])
        #expect(published.status == 201, "\(published.text)")
        let result = try await device.syncManifest(tenant: "_")
        #expect(result.updated == 1 && result.signatureFailures == 0, "\(result)")
        #expect(device.host.engine.sequence(named: "payment-verification")?.version == 2)
        #expect(try await device.syncManifest(tenant: "_") == ManifestSyncResult(), "unchanged: 304")
        served.stop()
    }
}
