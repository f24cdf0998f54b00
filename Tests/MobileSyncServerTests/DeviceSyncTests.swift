import DeviceWorkflows
import WorkflowHost
import Orch8Wire
import Foundation
import LabKernel
import LabStore
import LabTestSupport
import Testing
@testable import MobileSyncServer

@Suite("Device sync against the server core")
struct DeviceSyncTests {
    static func sqlite(_ name: String = "device") throws -> (SQLiteWorkflowStore, String) {
        let path = TestPaths.scratchDirectory("device-sync").appendingPathComponent("\(name).sqlite").path
        return (try SQLiteWorkflowStore(path: path), path)
    }

    @Test("an approval round trip: the device reports and waits, an operator resolves, the device resumes and acks once")
    func approvalRoundTrip() throws {
        var pair = try DevicePair(store: InMemoryWorkflowStore())
        let id = try pair.device.start("payment-verification")
        try pair.settle()
        #expect(try pair.status(id)?["state"] == "Waiting" && pair.status(id)?["current_step"] == "payment_approval")
        let steps = try #require(try JSONValue.parse(try pair.status(id)?["steps"]?.stringValue ?? "").arrayValue)
        #expect(steps.count == 11 && steps.first?["block_id"] == "init_payment" && steps.first?["state"] == "completed", "\(steps.count) \(steps.first ?? nil)")
        let approval = try #require(try pair.approvals().first)
        #expect(approval["block_id"] == "payment_approval" && approval["prompt"] == "Approve this payment of $99.99?")
        #expect(approval["choices"] == #"[{"label":"Approve","value":"approved"},{"label":"Decline","value":"declined"}]"#)
        #expect(approval["timeout_secs"] == 3600)
        let approvalID = try #require(approval["id"]?.stringValue)
        _ = try pair.server.send("POST", "/api/v1/mobile/approvals/\(approvalID)/resolve", ["output": ["value": "approved"]], key: pair.key)
        let report = try #require(try pair.sync())
        #expect(report.applied.count == 1)
        try pair.device.runUntilIdle(limit: .seconds(10))
        #expect(pair.device.engine.instance(id)?.state == .completed && pair.device.engine.instance(id)?.data["payment_decision"] == "approved")
        try pair.sync()
        #expect(try pair.status(id)?["state"] == "Completed")
        let (_, after) = try pair.server.sync(SyncRequest(deviceID: "phone-1"), key: pair.key)
        #expect(after?.commands.isEmpty == true, "acknowledged commands are never sent again")
        #expect(try pair.device.store.outboxCount() == 0)
    }

    @Test("a command delivered twice is applied once and acknowledged twice")
    func duplicates() throws {
        var pair = try DevicePair(store: InMemoryWorkflowStore())
        let start = SyncCommand(id: "cmd-1", type: "start_workflow", payload: ["sequence_name": "payment-verification", "input": ["n": 1]])
        var report = try pair.deliver([start])
        #expect(report.applied == ["cmd-1"])
        report = try pair.deliver([start, start])
        #expect(report.duplicates == ["cmd-1", "cmd-1"] && report.applied.isEmpty)
        #expect(pair.device.engine.allInstances.count == 1)
        #expect(try pair.device.store.pendingAcks(limit: 10) == ["cmd-1"])
    }

    @Test("a command that may apply later is not acknowledged and runs when it can; one that never can is acknowledged")
    func retryable() throws {
        var pair = try DevicePair(store: InMemoryWorkflowStore(), workflows: [])
        let start = SyncCommand(id: "cmd-2", type: "start_workflow", payload: ["sequence_name": "payment-verification"])
        var report = try pair.deliver([start])
        #expect(report.deferred.map(\.id) == ["cmd-2"] && report.deferred.first?.reason.contains("payment-verification") == true, "\(report.deferred)")
        #expect(try pair.device.store.pendingAcks(limit: 10).isEmpty && !(try pair.device.store.isExecuted("cmd-2")))
        _ = try pair.device.loadSequence(json: workflowJSON("payment-verification"))
        report = try pair.deliver([start])
        #expect(report.applied == ["cmd-2"])
        let bad = [SyncCommand(id: "cmd-3", type: "cancel_instance", payload: ["instance_id": "00000000-0000-4000-8000-000000000001"]),
                   SyncCommand(id: "cmd-4", type: "reboot", payload: [:]),
                   SyncCommand(id: "cmd-5", type: "complete_step", payload: ["instance_id": .string(pair.device.engine.allInstances[0].id),
                                                                          "step_name": "payment_approval", "output": ["value": "maybe"]])]
        report = try pair.deliver(bad)
        #expect(report.refused.map(\.id) == ["cmd-3", "cmd-4", "cmd-5"])
        // cmd-2's ack went with that last sync; the refused three wait for the next.
        #expect(try Set(pair.device.store.pendingAcks(limit: 10)) == ["cmd-3", "cmd-4", "cmd-5"] && pair.device.store.isExecuted("cmd-2"))
    }

    @Test("killed after applying a command and before the ack: the relaunched device does not apply it again")
    func crashBeforeAck() throws {
        let (store, path) = try Self.sqlite("crash")
        var pair = try DevicePair(store: store)
        let id = try pair.device.start("payment-verification")
        try pair.settle()
        let approvalID = try #require(try pair.approvals().first?["id"]?.stringValue)
        _ = try pair.server.send("POST", "/api/v1/mobile/approvals/\(approvalID)/resolve", ["output": "approved"], key: pair.key)
        try pair.sync()  // applies complete_step; the ack would go in the next request, which never happens
        #expect(pair.device.engine.instance(id)?.state == .running)
        var relaunched = try EngineHost.relaunch(config: DevicePair<SQLiteWorkflowStore>.engineConfig, store: try SQLiteWorkflowStore(path: path),
                                                 seed: StreamSeed(9), now: pair.device.now)
        relaunched.enableSync(deviceID: "phone-1", seed: StreamSeed(10))
        pair.device = relaunched
        let report = try #require(try pair.sync())  // carries the ack; the server may still include the command once more
        #expect(report.applied.isEmpty)
        try pair.device.runUntilIdle(limit: .seconds(10))
        #expect(pair.device.engine.instance(id)?.state == .completed && pair.device.handlerRuns.isEmpty == false)
        try pair.sync()
        let (_, after) = try pair.server.sync(SyncRequest(deviceID: "phone-1"), key: pair.key)
        #expect(after?.commands.isEmpty == true)
    }

    @Test("offline and server errors lose nothing: the outbox keeps every entry until a sync succeeds, then it is empty")
    func offline() throws {
        var pair = try DevicePair(store: InMemoryWorkflowStore())
        pair.offline = true
        var ids: [String] = []
        for _ in 0..<3 { ids.append(try pair.device.start("payment-verification")) }
        try pair.device.runUntilIdle(limit: .seconds(10))
        try pair.sync()
        try pair.sync()
        #expect(pair.device.syncClient?.failures == 2)
        #expect(try pair.device.store.outboxCount() == 6, "three statuses and three approvals wait")
        pair.offline = false
        try pair.sync()
        #expect(try pair.device.store.outboxCount() == 0)
        for id in ids { #expect(try pair.status(id)?["state"] == "Waiting") }
        #expect(try pair.approvals().count == 3)
    }

    @Test("batches hold at most 100 statuses; the rest go next time")
    func batches() throws {
        var store = InMemoryWorkflowStore()
        for n in 0..<150 { try store.enqueue(.status(DelegationCadenceTests.status("i\(n)"))) }
        for n in 0..<60 { try store.enqueue(.approval(DelegationCadenceTests.approval("i\(n)", "g"))) }
        var host = EngineHost(engine: MobileEngine(config: MobileEngineConfig(), handlers: [], seed: StreamSeed(1)), store: store)
        host.enableSync(deviceID: "d", seed: StreamSeed(1))
        let request = try #require(try host.sync(.syncRequested).send)
        let sent = try #require(host.syncClient?.inFlight)
        #expect(request.statusUpdates.count == 100 && request.approvalRequests.count == 50)
        #expect(sent.entries.filter { $0.kind == .status }.count == 100 && sent.entries.filter { $0.kind == .approval }.count == 50)
        #expect(sent.entries.first?.key == "i0", "oldest first")
    }
}
