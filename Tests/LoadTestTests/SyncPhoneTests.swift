import Foundation
import Testing
import DeviceWorkflows
import LabKernel
import LabTestSupport
import Live
import WorkflowHost
@testable import LoadTest

@Suite("A load test's sync phone")
struct SyncPhoneTests {
    @Test("a killed app comes back with what it stored: the same instance, waiting at the same step, its unacknowledged reports still to send; a new engine and sync client")
    func relaunchRestores() throws {
        let http = HTTPClient()
        defer { http.shutdown() }
        let json = try String(contentsOf: TestPaths.packageRoot.appendingPathComponent("simulations/workflows/payment-verification.json"), encoding: .utf8)
        let phone = SyncPhone(baseURL: "http://127.0.0.1:9", apiKey: "key", deviceID: "phone-1", seed: 7, http: http, requestTimeout: .seconds(1),
                              sequences: [("payment-verification", json)], relaunchShare: .one)
        _ = try phone.device.host.loadSequence(json: json)
        _ = try phone.device.host.start("payment-verification")
        let deadline = Date().addingTimeInterval(10)
        while phone.device.host.engine.waitingSteps().isEmpty && Date() < deadline {
            try phone.device.step()
            Thread.sleep(forTimeInterval: 0.02)
        }
        let waiting = phone.device.host.engine.waitingSteps()
        try #require(waiting.count == 1 && waiting[0].step == "payment_approval", "\(waiting)")
        let outbox = try phone.device.host.store.outboxCount()
        #expect(outbox > 0, "statuses and the approval wait for a sync that never came")
        let before = phone.device
        try phone.relaunch()
        #expect(phone.device !== before, "a new process: engine and sync client built again")
        let restored = phone.device.host.engine.waitingSteps()
        #expect(restored.map(\.instanceID) == waiting.map(\.instanceID) && restored.map(\.step) == ["payment_approval"])
        #expect(phone.device.host.engine.activeCount == 1)
        #expect(try phone.device.host.store.outboxCount() == outbox)
        #expect(phone.launches == 1 && !phone.killed)
    }
}
