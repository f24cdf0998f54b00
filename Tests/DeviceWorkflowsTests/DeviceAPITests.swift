import Foundation
import LabKernel
import LabTestSupport
import Testing
@testable import DeviceWorkflows
@testable import WorkflowHost
@testable import Orch8Wire

@Suite("Engine API parity with the seed: handlers, device context, sequence lists, telemetry")
struct DeviceAPITests {
    let usesGreet = sequence(#"{"type":"step","id":"hello","handler":"greet"}"#, name: "greeting")

    @Test("registerHandler after creation: a sequence naming it loads from then on, and the handler runs")
    func registerLater() throws {
        var host = try inlineHost([])
        #expect(throws: MobileEngineError.self) { try host.loadSequence(json: usesGreet) }
        host.registerHandler("greet") { _ in .success(["greeting": "hi"]) }
        _ = try host.loadSequence(json: usesGreet)
        let id = try host.start("greeting")
        try host.runUntilIdle()
        #expect(host.state(id) == .completed && host.data(id)["hello"] == ["greeting": "hi"])
    }

    @Test("loadSequencesFromUrl: an array loads every good definition and names each bad one by index; \"\" uses config.sequencesUrl")
    func sequenceList() throws {
        var host = try inlineHost([], config: config { $0.sequencesUrl = "https://example.test/sequences.json" })
        let list = "[" + [workflowJSON("onboarding-flow"), #"{"name":"broken","blocks":[]}"#, "7", workflowJSON("feature-access")]
            .joined(separator: ",") + "]"
        var asked: [String] = []
        let result = try host.loadSequences(fromURL: "") { fetch in
            asked.append(fetch.url)
            return ManifestFetchReply(status: 200, body: Array(list.utf8))
        }
        #expect(asked == ["https://example.test/sequences.json"])
        #expect(result.loaded.map(\.name) == ["onboarding-flow", "feature-access"])
        #expect(result.problems.count == 2 && result.problems[0].hasPrefix("[1]") && result.problems[1] == "[2]: not a JSON object")
        #expect(throws: MobileEngineError.self) {
            try host.loadSequences(fromURL: "https://x.test/a") { _ in ManifestFetchReply(status: 200, body: Array("{}".utf8)) }
        }
        #expect(throws: MobileEngineError.self) {
            try host.loadSequences(fromURL: "https://x.test/a") { _ in ManifestFetchReply(status: 404, body: []) }
        }
    }

    @Test("telemetry leaves in batches of at most 500 with the device context; delivered events leave the store; at most 5,000 are kept")
    func telemetryBatches() throws {
        var host = try makeHost(["payment-verification"], config: config { $0.environment = "staging" })
        host.standingAnswers = ["payment_approval": "approved"]
        host.enableSync(deviceID: "phone-9", seed: StreamSeed(2))
        host.setDeviceContext(DeviceContext(deviceID: "phone-9", osName: "iOS", osVersion: "18.1", appVersion: "2.3"))
        let id = try host.start("payment-verification")
        try host.runUntilIdle()
        #expect(host.state(id) == .completed)
        let recorded = try host.store.telemetryCount()
        #expect(recorded > 20)
        let batch = try #require(try host.makeTelemetryBatch())
        #expect(batch.count == recorded && batch.body["device"] == ["device_id": "phone-9", "os_name": "iOS", "os_version": "18.1",
                                                                     "app_version": "2.3", "sdk_version": "0.7.1"])
        let events = batch.body["events"]?.arrayValue ?? []
        #expect(Set(events.compactMap { $0["event_type"]?.stringValue }) == ["step_started", "step_completed", "instance_state_changed"])
        let first = try #require(events.first)
        #expect(first["timestamp"]?.stringValue?.hasSuffix("Z") == true)
        let payload = try JSONValue.parse(first["payload"]?.stringValue ?? "")
        #expect(payload["instance_id"] == .string(id) && payload["environment"] == "staging")
        try host.telemetryDelivered(batch)
        #expect(try host.store.telemetryCount() == 0 && host.makeTelemetryBatch() == nil)

        // A device offline for long: the diary is capped, the newest kept.
        for _ in 0..<300 { _ = try host.start("payment-verification") ; try host.runUntilIdle() }
        #expect(try host.store.telemetryCount() > 5_000)
        let capped = try #require(try host.makeTelemetryBatch())
        #expect(try host.store.telemetryCount() == 5_000 && capped.count == 500)
    }
}
