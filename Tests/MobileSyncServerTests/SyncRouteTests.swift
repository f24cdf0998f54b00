import DeviceWorkflows
import Orch8Wire
import Foundation
import LabKernel
import Testing
@testable import MobileSyncServer

@Suite("Sync server: /mobile/sync and devices")
struct SyncRouteTests {
    /// The request of wire-notes §a, as the SDK sends it.
    @Test("golden: the SDK's sync request decodes and our encoding has exactly its fields")
    func goldenRequest() throws {
        let text = """
        {"device_id":"dev-1","status_updates":[{"instance_id":"\(ServerHarness.uuid(1))","sequence_name":"onboarding-flow",
        "state":"Waiting","current_step":"show_terms","handler":"show_terms","timestamp":"2026-01-01T00:00:05Z",
        "steps":[{"block_id":"init_profile","block_type":"step","state":"completed","handler":"init_profile",
        "started_at":"2026-01-01T00:00:01Z","completed_at":"2026-01-01T00:00:02Z"}]}],
        "approval_requests":[{"instance_id":"\(ServerHarness.uuid(1))","block_id":"show_terms","sequence_name":"onboarding-flow",
        "prompt":"Accept?","choices":[{"label":"Accept","value":"accepted"}],"store_as":"terms_decision","timeout_seconds":86400}],
        "step_delegations":[],"command_acks":["c-1"]}
        """
        let request = try SyncRequest(json: try JSONValue.parse(text))
        #expect(request.statusUpdates[0].state == "Waiting" && request.approvalRequests[0].timeoutSeconds == 86400)
        let encoded = try #require(request.json.objectValue)
        #expect(Set(encoded.keys) == ["device_id", "status_updates", "approval_requests", "step_delegations", "command_acks"])
        #expect(Set(try #require(request.statusUpdates[0].json.objectValue).keys)
            == ["instance_id", "sequence_name", "state", "current_step", "handler", "timestamp", "context_summary", "steps"])
        #expect(Set(try #require(request.approvalRequests[0].json.objectValue).keys)
            == ["instance_id", "block_id", "sequence_name", "prompt", "choices", "store_as", "timeout_seconds", "metadata"])
        #expect(try SyncRequest(json: request.json) == request)
        let response = SyncResponse(commands: [SyncCommand(id: "c", type: "complete_step", payload: ["instance_id": "i"])], syncIntervalSecs: 5)
        #expect(response.json.canonicalText == #"{"commands":[{"id":"c","payload":{"instance_id":"i"},"type":"complete_step"}],"sync_interval_secs":5}"#)
        #expect(try SyncResponse(json: [:]) == SyncResponse(commands: [], syncIntervalSecs: 30))
    }

    @Test("keys: missing or wrong is 401, a tenant key cannot borrow another tenant, the root key may")
    func auth() throws {
        var h = try ServerHarness()
        let acme = try h.tenant("acme")
        #expect(try h.send("GET", "/api/v1/mobile/devices").status == 401)
        #expect(try h.send("GET", "/api/v1/mobile/devices", key: "nope").status == 401)
        #expect(try h.send("GET", "/api/v1/mobile/devices", key: "nope").errorText.hasPrefix("unauthorized:"))
        #expect(try h.send("GET", "/api/v1/mobile/devices", key: acme).status == 200)
        #expect(try h.send("GET", "/api/v1/mobile/devices", key: acme, headers: ["x-tenant-id": "globex"]).status == 403)
        #expect(try h.send("GET", "/api/v1/mobile/devices", key: h.root, headers: ["x-tenant-id": "globex"]).status == 200)
        #expect(try h.send("POST", "/api/v1/mobile/tenants", ["tenant_id": "x"], key: acme).status == 403)
        #expect(try h.send("POST", "/api/v1/mobile/tenants", ["tenant_id": "acme"], key: h.root).status == 409)
        // Bearer works too, for the manifest fetch the SDK authorises that way.
        #expect(try h.send("GET", "/api/v1/mobile/devices", headers: ["authorization": "Bearer \(acme)"]).status == 200)
        var open = try ServerHarness(authRequired: false)
        #expect(try open.send("GET", "/api/v1/mobile/devices").status == 200)
    }

    @Test("register: 201 empty; another tenant's device id is 409; listings see only their tenant")
    func devices() throws {
        var h = try ServerHarness()
        let acme = try h.tenant("acme"), globex = try h.tenant("globex")
        let first = try h.register("phone-1", key: acme)
        #expect(first.status == 201 && first.body.isEmpty)
        #expect(try h.register("phone-1", key: acme).status == 201, "re-registering your own device updates it")
        let clash = try h.register("phone-1", key: globex)
        #expect(clash.status == 409 && clash.errorText == "conflict: device phone-1 is already registered to another tenant")
        _ = try h.register("phone-2", key: globex)
        let mine = try h.send("GET", "/api/v1/mobile/devices", key: acme).jsonBody
        #expect(mine?["total"] == 1 && mine?["items"]?.arrayValue?.first?["device_id"] == "phone-1")
        #expect(try h.send("GET", "/api/v1/mobile/devices", key: h.root).jsonBody?["total"] == 2)
        let item = try #require(mine?["items"]?.arrayValue?.first?.objectValue)
        #expect(Set(item.keys) == ["device_id", "tenant_id", "push_token", "platform", "app_version", "active", "last_sync_at", "registered_at"])
    }

    @Test("sync: statuses coalesce per instance and a late older one loses; approvals once per gate; last_sync_at kept")
    func syncCoalesces() throws {
        var h = try ServerHarness()
        let acme = try h.tenant("acme")
        _ = try h.register("phone-1", key: acme)
        let id = ServerHarness.uuid(7)
        func status(_ state: String, _ at: String) -> StatusUpdate {
            StatusUpdate(instanceID: id, sequenceName: "s", state: state, currentStep: "a", handler: nil, timestamp: at)
        }
        let approval = ApprovalRequest(instanceID: id, blockID: "gate", sequenceName: "s", prompt: "ok?", choices: nil, storeAs: nil, timeoutSeconds: nil)
        var (reply, _) = try h.sync(SyncRequest(deviceID: "phone-1", statusUpdates: [status("Running", "2026-01-01T00:00:01Z"),
                                                                                  status("Waiting", "2026-01-01T00:00:02Z")],
                                                approvalRequests: [approval, approval]), key: acme)
        #expect(reply.status == 200)
        (reply, _) = try h.sync(SyncRequest(deviceID: "phone-1", statusUpdates: [status("Running", "2026-01-01T00:00:01.500Z")],
                                            approvalRequests: [approval]), key: acme)
        let statuses = try #require(try h.send("GET", "/api/v1/mobile/status?device_id=phone-1", key: acme).jsonBody)
        #expect(statuses["total"] == 1 && statuses["items"]?.arrayValue?.first?["state"] == "Waiting")
        let approvals = try #require(try h.send("GET", "/api/v1/mobile/approvals?state=pending", key: acme).jsonBody)
        #expect(approvals["total"] == 1)
        #expect(h.server.state.devices["phone-1"]?.lastSyncAt == h.timestamp)
    }

    @Test("sync: commands oldest first, at most 50, interval 5 s while any are pending and 30 s after; acked ones never again")
    func syncCommands() throws {
        var h = try ServerHarness()
        let acme = try h.tenant("acme")
        _ = try h.register("phone-1", key: acme)
        var ids: [String] = []
        for n in 0..<60 {
            let r = try h.send("POST", "/api/v1/mobile/commands", ["device_id": "phone-1", "command_type": "cancel_instance",
                                                                   "payload": ["instance_id": .string(ServerHarness.uuid(n))]], key: acme)
            #expect(r.status == 201)
            ids.append(r.jsonBody?["id"]?.stringValue ?? "")
            h.now = h.now + .milliseconds(1)
        }
        var (_, response) = try h.sync(SyncRequest(deviceID: "phone-1"), key: acme)
        #expect(response?.commands.map(\.id) == Array(ids.prefix(50)) && response?.syncIntervalSecs == 5)
        (_, response) = try h.sync(SyncRequest(deviceID: "phone-1", commandAcks: Array(ids.prefix(50))), key: acme)
        #expect(response?.commands.map(\.id) == Array(ids.suffix(10)))
        (_, response) = try h.sync(SyncRequest(deviceID: "phone-1", commandAcks: Array(ids.suffix(10)) + ["unknown", ids[0]]), key: acme)
        #expect(response?.commands.isEmpty == true && response?.syncIntervalSecs == 30)
    }

    @Test("sync: another tenant's device is 404, an unknown one too; x-device-id must match")
    func syncOwnership() throws {
        var h = try ServerHarness()
        let acme = try h.tenant("acme"), globex = try h.tenant("globex")
        _ = try h.register("phone-1", key: acme)
        let foreign = try h.send("POST", "/api/v1/mobile/sync", SyncRequest(deviceID: "phone-1").json, key: globex)
        #expect(foreign.status == 404 && foreign.errorText == "not found: device phone-1 not found")
        #expect(try h.send("POST", "/api/v1/mobile/sync", SyncRequest(deviceID: "ghost").json, key: acme).status == 404)
        let mismatch = try h.send("POST", "/api/v1/mobile/sync", SyncRequest(deviceID: "phone-1").json, key: acme,
                                  headers: ["x-device-id": "phone-9"])
        #expect(mismatch.status == 400 && mismatch.errorText.contains("does not match"))
    }

    @Test("bare /mobile routes answer with deprecation headers; /api/v1 ones without")
    func deprecation() throws {
        var h = try ServerHarness()
        let bare = try h.send("GET", "/mobile/devices", key: h.root)
        #expect(bare.status == 200 && bare.header("Deprecation") == "true")
        #expect(bare.header("Link") == "</api/v1/mobile/devices>; rel=\"successor-version\"")
        #expect(try h.send("GET", "/api/v1/mobile/devices", key: h.root).header("Deprecation") == nil)
        #expect(try h.send("GET", "/api/v1/mobile/nothing", key: h.root).status == 404)
        #expect(try h.send("DELETE", "/api/v1/mobile/sync", key: h.root).status == 405)
    }
}
