import DeviceWorkflows
import WorkflowHost
import Orch8Wire
import Foundation
import LabKernel
import LabTestSupport
import Testing
@testable import Live

/// The development push channel: a dashboard decision reaches a connected device at once.
@Suite("Push wake over loopback", .serialized)
struct PushChannelTests {
    /// The first wakes to arrive (within three seconds), and how long after `start`.
    static func wakes<S>(of device: LiveDevice<S>, since start: Date) async throws -> ([JSONValue], TimeInterval) {
        var wakes: [JSONValue] = []
        while wakes.isEmpty && Date().timeIntervalSince(start) < 3 {
            wakes = device.takeWakes()
            if wakes.isEmpty { try await Task.sleep(for: .milliseconds(20)) }
        }
        return (wakes, Date().timeIntervalSince(start))
    }

    @Test("a resolved approval and a queued command wake a subscribed device within a second; a foreign key cannot subscribe")
    func wakeWithinASecond() async throws {
        let served = try await ServedFleetlab.start(data: TestPaths.scratchDirectory("push-serve").path)
        defer { served.stop() }
        let key = served.rootKey
        let device = try LoopbackDeviceTests.device(served.syncURL, key: key, dir: TestPaths.scratchDirectory("push-device"))
        try await device.register()  // no push token: the development channel wakes it anyway
        _ = try device.host.loadSequence(json: workflowJSON("payment-verification"))
        let id = try device.host.start("payment-verification")
        try device.step()
        try await device.syncNow()
        try await device.subscribeToPush()

        let approvals = try JSONValue.parse(try await HTTPProbe.request("GET", served.syncURL + "/api/v1/mobile/approvals?state=pending",
                                                                         headers: ["x-api-key": key]).text)
        let approval = try #require(approvals["items"]?.arrayValue?.first?["id"]?.stringValue)
        let resolved = try await HTTPProbe.request("POST", served.syncURL + "/api/v1/mobile/approvals/\(approval)/resolve",
                                                   body: Data(#"{"output":{"value":"approved"}}"#.utf8), headers: ["x-api-key": key])
        #expect(resolved.status == 200)
        // The server writes the wake before it answers the decision, so the time from that
        // answer bounds the push's delay (and not this busy machine's HTTP client's).
        var (wakes, latency) = try await Self.wakes(of: device, since: Date())
        #expect(wakes.count == 1 && latency < 1, "woken after \(latency) s")
        #expect(try await device.syncIfDue()?.applied.count == 1, "the wake made the next sync due at once")
        try device.step()
        #expect(device.host.engine.instance(id)?.state == .completed)

        // A command queued from the API wakes it too.
        let cancel = JSONValue.object(["device_id": "pixel-7", "command_type": "start_workflow", "payload": ["sequence_name": "payment-verification"]])
        _ = try await HTTPProbe.request("POST", served.syncURL + "/api/v1/mobile/commands", body: Data(cancel.canonicalText.utf8),
                                        headers: ["x-api-key": key, "content-type": "application/json"])
        (wakes, latency) = try await Self.wakes(of: device, since: Date())
        #expect(wakes.first?["command_id"] != nil && latency < 1, "woken after \(latency) s")
        device.unsubscribeFromPush()

        // Another tenant's key cannot listen to this device.
        let tenant = try await HTTPProbe.request("POST", served.syncURL + "/api/v1/mobile/tenants", body: Data(#"{"tenant_id":"other"}"#.utf8),
                                                 headers: ["x-api-key": key])
        let otherKey = try #require((tenant.json as? [String: Any])?["api_key"] as? String)
        await #expect(throws: PushChannelClient.Refused.self) {
            _ = try await PushChannelClient.connect(baseURL: served.syncURL, deviceID: "pixel-7", apiKey: otherKey, onWake: { _ in })
        }
    }
}
