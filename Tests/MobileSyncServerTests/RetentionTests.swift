import DeviceWorkflows
import Orch8Wire
import Foundation
import LabKernel
import LabStore
import Testing
@testable import MobileSyncServer
import ServerStorage

@Suite("Sync server: telemetry and retention")
struct RetentionTests {
    static let device: JSONValue = ["device_id": "phone-1", "os_name": "iOS", "os_version": "18", "app_version": "1", "sdk_version": "0.7.1"]

    func events(_ count: Int, _ type: String = "step_completed") -> JSONValue {
        .array((0..<count).map { ["event_type": .string("\(type)"), "payload": .string("{\"n\":\($0)}"), "timestamp": "2026-01-01T00:00:00Z"] })
    }

    @Test("a device's recent telemetry, newest first, for its own tenant only; another tenant cannot write to it")
    func recentTelemetry() throws {
        var h = try ServerHarness()
        let acme = try h.tenant("acme")
        let globex = try h.tenant("globex")
        _ = try h.register("phone-1", key: acme)
        #expect(try h.send("POST", "/telemetry/mobile", ["events": events(3), "device": Self.device], key: acme).status == 200)
        let page = try h.send("GET", "/api/v1/mobile/devices/phone-1/telemetry?limit=2", key: acme).jsonBody
        #expect(page?["total"] == 3 && page?["items"]?.arrayValue?.map { $0["payload"] } == [#"{"n":2}"#, #"{"n":1}"#])
        #expect(try h.send("GET", "/api/v1/mobile/devices/phone-1/telemetry", key: globex).status == 404)
        let forged = try h.send("POST", "/telemetry/mobile", ["events": events(1, "forged"), "device": Self.device], key: globex)
        #expect(forged.status == 404)
        #expect(h.server.state.recentTelemetry["phone-1"]?.count == 3)
    }

    @Test("acknowledged commands go after 7 days with their delegation markers, closed approvals and telemetry after 30; pending work stays")
    func retention() throws {
        var h = try ServerHarness(sqlite: true)
        let acme = try h.tenant("acme")
        _ = try h.register("phone-1", key: acme)
        let instance = ServerHarness.uuid(7)
        let gate = ApprovalRequest(instanceID: instance, blockID: "gate", sequenceName: "s", prompt: "ok?", choices: nil, storeAs: nil, timeoutSeconds: nil)
        let open = ApprovalRequest(instanceID: instance, blockID: "later", sequenceName: "s", prompt: "ok?", choices: nil, storeAs: nil, timeoutSeconds: nil)
        let delegation = StepDelegation(requestID: "r1", instanceID: instance, blockID: "b", handler: "noop", params: [:])
        var (_, response) = try h.sync(SyncRequest(deviceID: "phone-1", approvalRequests: [gate, open], stepDelegations: [delegation]), key: acme)
        let stepResult = try #require(response?.commands.first?.id)
        let approvalID = try #require(h.server.state.approvals.values.first { $0.blockID == "gate" }?.id)
        #expect(try h.send("POST", "/api/v1/mobile/approvals/\(approvalID)/resolve", ["output": ["value": "yes"]], key: acme).status == 200)
        (_, response) = try h.sync(SyncRequest(deviceID: "phone-1", commandAcks: [stepResult]), key: acme)
        let completeStep = try #require(response?.commands.first?.id)
        _ = try h.send("POST", "/telemetry/mobile", ["events": events(2), "device": Self.device], key: acme)
        #expect(h.server.state.meta["delegation|phone-1|r1"] == stepResult)

        h.now = h.now + .days(8)
        _ = try h.send("GET", "/api/v1/mobile/devices", key: acme)
        #expect(h.server.state.commands[stepResult] == nil, "acknowledged over 7 days ago")
        #expect(h.server.state.meta["delegation|phone-1|r1"] == nil, "its marker went with it")
        #expect(h.server.state.commands[completeStep] != nil, "never acknowledged: kept")
        #expect(h.server.state.approvals[approvalID] != nil && h.server.state.recentTelemetry["phone-1"]?.count == 2)

        h.now = h.now + .days(23)
        _ = try h.send("GET", "/api/v1/mobile/devices", key: acme)
        #expect(h.server.state.approvals[approvalID] == nil, "resolved over 30 days ago")
        #expect(h.server.state.approvals.values.contains { $0.blockID == "later" && $0.state == .pending }, "pending: kept")
        #expect(h.server.state.recentTelemetry["phone-1"] == nil)
        let rows = try #require(h.store).database.query("SELECT COUNT(*) FROM telemetry").first?.first?.integer
        #expect(rows == 0)
        let reloaded = try #require(h.store).load()
        #expect(reloaded == h.server.state, "the database forgot the same rows")
    }

    @Test("the typed sync the simulator drives runs the same sweep: a week after its acknowledgement a command is gone")
    func typedSyncSweeps() throws {
        var h = try ServerHarness()
        let acme = try h.tenant("acme")
        _ = try h.register("phone-1", key: acme)
        let tenant = try #require(h.server.state.devices["phone-1"]?.tenantID)
        let delegation = StepDelegation(requestID: "r1", instanceID: ServerHarness.uuid(7), blockID: "b", handler: "noop", params: [:])
        let first = try h.server.sync(SyncRequest(deviceID: "phone-1", stepDelegations: [delegation]), tenant: tenant, now: h.now)
        let command = try #require(first.response.commands.first?.id)
        _ = try h.server.sync(SyncRequest(deviceID: "phone-1", commandAcks: [command]), tenant: tenant, now: h.now)
        #expect(h.server.state.commands[command]?.ackedAt != nil)

        h.now = h.now + .days(6)
        _ = try h.server.sync(SyncRequest(deviceID: "phone-1"), tenant: tenant, now: h.now)
        #expect(h.server.state.commands[command] != nil, "acknowledged six days ago: kept")
        h.now = h.now + .days(2)
        _ = try h.server.sync(SyncRequest(deviceID: "phone-1"), tenant: tenant, now: h.now)
        #expect(h.server.state.commands[command] == nil, "acknowledged eight days ago: forgotten")
        #expect(h.server.state.meta["delegation|phone-1|r1"] == nil)
    }
}
