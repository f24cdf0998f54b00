import DeviceWorkflows
import WorkflowHost
import Orch8Wire
import Foundation
import LabKernel
import LabTestSupport
import Testing
@testable import Live

/// The Mobile Sync dashboard in headless Chromium, against a served instance, with real
/// mouse clicks.
@Suite("Mobile Sync dashboard in Chromium", .serialized)
struct MobileSyncDashboardTests {
    @Test("sign in with the form; resolving an approval in the page delivers complete_step; the form starts a workflow; rows expand; events show")
    func resolveInPage() async throws {
        let served = try await ServedFleetlab.start(data: TestPaths.scratchDirectory("dashboard-serve").path)
        defer { served.stop() }
        let device = try LoopbackDeviceTests.device(served.syncURL, key: served.rootKey, dir: TestPaths.scratchDirectory("dashboard-device"))
        try await device.register()
        _ = try device.host.loadSequence(json: workflowJSON("feature-access"))
        let id = try device.host.start("feature-access")
        try device.step()
        try await device.syncNow()

        let page = try ChromiumSession(url: served.syncURL + "/dashboard/mobile-sync")
        try page.wait(until: "document.getElementById('signin').style.display === 'flex'")
        try page.type("not-a-key", into: "#keyinput")
        try page.click("#keysave")
        try page.wait(until: "location.search.includes('signin=failed') && document.getElementById('error').textContent.includes('not valid')")
        try page.type(served.rootKey, into: "#keyinput")
        try page.click("#keysave")
        try page.wait(until: "document.body.getAttribute('data-loaded') === 'true'")
        #expect(try page.evaluate("location.href") as? String == served.syncURL + "/dashboard/mobile-sync", "the key is in no URL")
        #expect(try page.evaluate("document.cookie") as? String == "", "the session cookie is HttpOnly: the page's script cannot read it")
        try page.wait(until: "document.querySelectorAll('[data-approval] button').length === 2")
        let labels = try page.evaluate("Array.from(document.querySelectorAll('[data-approval] button')).map(b => b.textContent)") as? [String]
        #expect(labels == ["Allow", "Don't allow"], "the step's own choices are the buttons")
        #expect(try page.evaluate("document.querySelector('[data-approval] td:nth-child(5)').textContent") as? String
            == "Share usage data to enable premium analytics?")

        try page.click("[data-approval] button[data-value='granted']")
        try page.wait(until: "document.querySelectorAll('[data-approval]').length === 0")
        let report = try #require(try await device.syncNow())
        #expect(report.applied.count == 1, "the device received complete_step")
        try device.step()
        #expect(device.host.engine.instance(id)?.data["consent_decision"] == "granted")
        try await device.syncNow()

        // The instance row shows progress; clicking it expands the step timeline.
        try page.wait(until: "document.querySelector('tr.instance .badge') !== null")
        try page.click("tr.instance[data-instance='\(id)']")
        try page.wait(until: "document.querySelectorAll('.timeline li').length === 12")
        let current = try page.evaluate("document.querySelector('.timeline li.current')?.getAttribute('data-step')") as? String
        #expect(current == "access_approval", "the waiting step is highlighted")
        let shot = TestPaths.scratchDirectory("dashboard-shot").appendingPathComponent("mobile-sync-dashboard.png")
        try page.screenshot().write(to: shot)

        // The device's telemetry, in its own panel.
        try await device.flushTelemetry()
        #expect(device.telemetrySent > 0, "every successful sync also sends the recorded telemetry")
        try page.wait(until: "document.querySelectorAll('#events tr[data-event]').length > 0")
        let kinds = try page.evaluate("Array.from(document.querySelectorAll('#events tr[data-event]')).map(r => r.getAttribute('data-event'))") as? [String]
        #expect(kinds?.contains("step_completed") == true)

        // Start Workflow: device dropdown, sequence, initial JSON.
        try page.type("payment-verification", into: "#start-sequence")
        try page.type(#"{"amount": 12}"#, into: "#start-input")
        try page.click("#start-button")
        try page.wait(until: "document.getElementById('error').style.display !== 'block'")
        try await Task.sleep(for: .milliseconds(300))
        _ = try device.host.loadSequence(json: workflowJSON("payment-verification"))
        let started = try #require(try await device.syncNow())
        #expect(started.applied.count == 1)
        #expect(device.host.engine.allInstances.contains { $0.sequenceName == "payment-verification" && $0.data["amount"] == 12 })

        // Update on a live instance offers the five policies.
        try page.click("tr.instance[data-instance='\(id)'] button[data-action='update']")
        try page.wait(until: "document.querySelectorAll('tr.instance[data-instance=\"\(id)\"] button[data-policy]').length === 5")
        try page.click("tr.instance[data-instance='\(id)'] button[data-policy='cancel']")
        try await Task.sleep(for: .milliseconds(300))
        try await device.syncNow()
        #expect(device.host.engine.instance(id)?.state == .cancelled)
    }
}
