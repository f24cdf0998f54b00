import DeviceWorkflows
import Orch8Wire
import Foundation
import LabCrypto
import LabKernel
import Testing
@testable import MobileSyncServer

/// The field sets of wire-notes §a, so a client written against the real server reads
/// ours: every record has exactly the real one's keys, with JSON-in-a-string where the
/// real one has it (approval `choices`, `metadata`, `resolution`; status `steps`).
@Suite("Sync server: golden wire shapes")
struct GoldenShapeTests {
    static let instance = ServerHarness.uuid(11)

    func keys(_ value: JSONValue?) -> Set<String> { Set(value?.objectValue?.keys ?? [:].keys) }

    @Test("approvals, statuses, commands, pushes, errors and the manifest have exactly the real server's fields")
    func shapes() throws {
        var h = try ServerHarness()
        let acme = try h.tenant("acme")
        _ = try h.register("phone-1", key: acme, push: "apns-1")
        let status = StatusUpdate(instanceID: Self.instance, sequenceName: "payment-verification", state: "Waiting",
                                  currentStep: "payment_approval", handler: "request_approval", timestamp: "2026-01-01T00:00:05Z",
                                  steps: [["block_id": "payment_approval", "block_type": "step", "state": "waiting",
                                           "handler": "request_approval", "started_at": "2026-01-01T00:00:04Z", "completed_at": nil]])
        let gate = ApprovalRequest(instanceID: Self.instance, blockID: "payment_approval", sequenceName: "payment-verification",
                                   prompt: "Approve?", choices: [["label": "Approve", "value": "approved"]], storeAs: "decision",
                                   timeoutSeconds: 600, metadata: ["amount": 5])
        _ = try h.sync(SyncRequest(deviceID: "phone-1", statusUpdates: [status], approvalRequests: [gate]), key: acme)

        let approvals = try h.send("GET", "/api/v1/mobile/approvals?state=pending", key: acme).jsonBody
        #expect(keys(approvals) == ["items", "total"])
        let approval = approvals?["items"]?.arrayValue?.first
        #expect(keys(approval) == ["id", "device_id", "tenant_id", "instance_id", "block_id", "sequence_name", "prompt", "choices",
                                   "store_as", "timeout_secs", "metadata", "state", "resolution", "created_at", "resolved_at"])
        #expect(approval?["choices"] == #"[{"label":"Approve","value":"approved"}]"#, "choices is a JSON string, as the real server's")
        #expect(approval?["metadata"] == #"{"amount":5}"#)
        #expect(approval?["state"] == "pending" && approval?["timeout_secs"] == 600 && approval?["resolved_at"] == .null)
        #expect(UUIDText.isValid(approval?["id"]?.stringValue ?? ""))

        let statuses = try h.send("GET", "/api/v1/mobile/status?device_id=phone-1", key: acme).jsonBody
        let row = statuses?["items"]?.arrayValue?.first
        #expect(keys(row) == ["device_id", "instance_id", "sequence_name", "state", "current_step", "handler", "context_summary",
                              "steps", "updated_at"])
        #expect(row?["state"] == "Waiting" && row?["steps"]?.stringValue?.hasPrefix(#"[{"block_id":"payment_approval""#) == true)

        let id = approval?["id"]?.stringValue ?? ""
        let resolved = try h.send("POST", "/api/v1/mobile/approvals/\(id)/resolve", ["output": ["value": "approved"]], key: acme)
        #expect(resolved.status == 200 && resolved.body.isEmpty, "the real server answers 200 with an empty body")
        let after = try h.send("GET", "/api/v1/mobile/approvals?state=resolved", key: acme).jsonBody?["items"]?.arrayValue?.first
        #expect(after?["resolution"] == #"{"value":"approved"}"# && after?["resolved_at"]?.stringValue != nil)

        let wake = h.pushes.last?.metadata
        #expect(keys(wake) == ["schema_version", "tenant_id", "device_id", "command_id", "nonce", "issued_at", "expires_at", "key_id",
                               "signature"])
        #expect(UUIDText.isValid(wake?["nonce"]?.stringValue ?? ""))

        let (reply, response) = try h.sync(SyncRequest(deviceID: "phone-1"), key: acme)
        #expect(keys(reply.jsonBody) == ["commands", "sync_interval_secs"])
        let command = try #require(response?.commands.first)
        #expect(keys(reply.jsonBody?["commands"]?.arrayValue?.first) == ["id", "type", "payload"])
        #expect(UUIDText.isValid(command.id) && wake?["command_id"] == .string(command.id))
        #expect(Set(command.payload.objectValue?.keys ?? [:].keys) == ["instance_id", "block_id", "step_name", "output"])

        let missing = try h.send("GET", "/api/v1/mobile/nothing", key: acme)
        #expect(missing.status == 404 && keys(missing.jsonBody) == ["error"])
        #expect(missing.errorText.hasPrefix("not found: "), "errors are {\"error\": \"<kind>: <message>\"}")

        _ = try h.send("POST", "/api/v1/mobile/manifest/sequences",
                       ["sequence": ManifestPersistenceTests.sequence("greet", version: 1)], key: acme)
        _ = try h.send("DELETE", "/api/v1/mobile/manifest/sequences/greet", key: acme)
        let text = try h.send("GET", "/acme/manifest.json", key: acme).text
        let manifest = String(text.split(separator: "\n", maxSplits: 1).last ?? "")
        let body = try JSONValue.parse(manifest)
        #expect(keys(body) == ["signing_keys", "sequences", "removed", "manifest_version", "generated_at"])
        #expect(keys(body["signing_keys"]?.arrayValue?.first) == ["key_id", "public_key"])
        #expect(keys(body["removed"]?.arrayValue?.first) == ["name", "removed_at"])
    }

    @Test("a server that keeps no status texts (the simulator's) lists the status with its fields, the step list and context null")
    func statusTextsNotKept() throws {
        var h = try ServerHarness()
        h.server.config.keepsStatusTexts = false
        let acme = try h.tenant("acme")
        _ = try h.register("phone-1", key: acme, push: nil)
        let status = StatusUpdate(instanceID: Self.instance, sequenceName: "payment-verification", state: "Waiting",
                                  currentStep: "payment_approval", handler: "request_approval", timestamp: "2026-01-01T00:00:05Z",
                                  contextSummary: ["amount": 5],
                                  steps: [["block_id": "payment_approval", "block_type": "step", "state": "waiting"]])
        _ = try h.sync(SyncRequest(deviceID: "phone-1", statusUpdates: [status]), key: acme)
        let row = try h.send("GET", "/api/v1/mobile/status?device_id=phone-1", key: acme).jsonBody?["items"]?.arrayValue?.first
        #expect(keys(row) == ["device_id", "instance_id", "sequence_name", "state", "current_step", "handler", "context_summary",
                              "steps", "updated_at"], "the same shape")
        #expect(row?["state"] == "Waiting" && row?["current_step"] == "payment_approval")
        #expect(row?["steps"] == .null && row?["context_summary"] == .null)
    }
}
