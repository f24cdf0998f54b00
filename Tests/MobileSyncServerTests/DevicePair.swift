import DeviceWorkflows
import WorkflowHost
import Orch8Wire
import Foundation
import LabKernel
import LabTestSupport
import Testing
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
        guard let request = try device.sync(.syncRequested).send else { return nil }
        var answer = SyncAnswer.unreachable
        if !offline {
            let reply = try server.send("POST", "/api/v1/mobile/sync", request.json, key: key, headers: ["x-device-id": "phone-1"])
            answer = SyncAnswer(status: reply.status, retryAfter: reply.header("retry-after"), body: reply.body)
        }
        return try device.sync(.answered(answer, tick: tick)).report
    }

    /// Hands the device `commands` as the answer to a sync (without the server).
    mutating func deliver(_ commands: [SyncCommand]) throws -> CommandReport {
        _ = try device.sync(.syncRequested)
        return try #require(try device.sync(.answered(.accepted(SyncResponse(commands: commands, syncIntervalSecs: 5)), tick: tick)).report)
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

