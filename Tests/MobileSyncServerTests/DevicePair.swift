import DeviceWorkflows
import WorkflowHost
import Orch8Wire
import Foundation
import LabKernel
import LabTestSupport
@testable import MobileSyncServer

/// One device (an `EngineHost` with sync on) and the server core, talking by function call
/// instead of HTTP: the in-process twin of the loopback test.
struct DevicePair<Store: WorkflowStore> {
    var server: ServerHarness
    var device: EngineHost<Store>
    let key: String
    var tick: UInt64 = 0
    /// Set to make the "network" fail.
    var offline = false

    init(store: Store, workflows: [String] = ["payment-verification"], extra: [String] = [],
         config: MobileEngineConfig = DevicePair.engineConfig) throws {
        server = try ServerHarness()
        key = try server.tenant("acme")
        _ = try server.register("phone-1", key: key, push: "tok-1")
        var engine = MobileEngine(config: config, handlers: BuiltinHandlers.names, seed: StreamSeed(3))
        engine.resume()
        device = EngineHost(engine: engine, store: store)
        device.enableSync(deviceID: "phone-1", seed: StreamSeed(4))
        for name in workflows { _ = try device.loadSequence(json: workflowJSON(name)) }
        for json in extra { _ = try device.loadSequence(json: json) }
    }

    static var engineConfig: MobileEngineConfig {
        var c = MobileEngineConfig()
        c.tickIntervalMs = 100
        return c
    }

    /// One sync round trip now, whether due or not; returns the command report.
    @discardableResult
    mutating func sync() throws -> CommandReport? {
        let (request, sent) = try device.makeSyncRequest()
        device.sync?.began()
        if offline {
            device.syncFailed()
            return nil
        }
        let reply = try server.send("POST", "/api/v1/mobile/sync", request.json, key: key, headers: ["x-device-id": "phone-1"])
        guard reply.status == 200, let json = reply.jsonBody, let response = try? SyncResponse(json: json) else {
            device.syncFailed()
            return nil
        }
        return try device.syncSucceeded(sent, response: response, tick: tick)
    }

    /// Ticks and syncs until idle.
    mutating func settle() throws {
        try device.runUntilIdle(limit: .seconds(10))
        try sync()
        try device.runUntilIdle(limit: .seconds(10))
    }

    mutating func approvals(_ state: String = "pending") throws -> [JSONValue] {
        try server.send("GET", "/api/v1/mobile/approvals?state=\(state)", key: key).jsonBody?["items"]?.arrayValue ?? []
    }

    mutating func status(_ id: String) throws -> JSONValue? {
        try server.send("GET", "/api/v1/mobile/status?device_id=phone-1", key: key).jsonBody?["items"]?.arrayValue?
            .first { $0["instance_id"]?.stringValue == id }
    }
}

