import DeviceWorkflows
import Orch8Wire
import Foundation
import LabCrypto
import LabKernel
import ServerStorage
import Testing
@testable import MobileSyncServer

@Suite("Sync server: approvals, commands, credentials, telemetry")
struct ApprovalCommandTests {
    static let instance = ServerHarness.uuid(3)

    /// A device waiting at a gate with custom choices.
    func waitingDevice(_ h: inout ServerHarness, push: String? = "apns-token-1") throws -> (key: String, approvalID: String) {
        let acme = try h.tenant("acme")
        _ = try h.register("phone-1", key: acme, push: push)
        let gate = ApprovalRequest(instanceID: Self.instance, blockID: "payment_approval", sequenceName: "payment-verification",
                                   prompt: "Approve?", choices: [["label": "Approve", "value": "approved"], ["label": "Decline", "value": "declined"]],
                                   storeAs: "payment_decision", timeoutSeconds: 3600)
        _ = try h.sync(SyncRequest(deviceID: "phone-1", approvalRequests: [gate]), key: acme)
        let list = try h.send("GET", "/api/v1/mobile/approvals?state=pending", key: acme).jsonBody
        return (acme, list?["items"]?.arrayValue?.first?["id"]?.stringValue ?? "")
    }

    @Test("resolving an approval queues complete_step and a signed push wake; it reaches the device on its next sync")
    func resolve() throws {
        var h = try ServerHarness()
        let (acme, id) = try waitingDevice(&h)
        let record = try #require(h.server.state.approvals[id])
        #expect(record.choices == #"[{"label":"Approve","value":"approved"},{"label":"Decline","value":"declined"}]"#)
        let resolved = try h.send("POST", "/api/v1/mobile/approvals/\(id)/resolve", ["output": ["value": "approved"]], key: acme)
        #expect(resolved.status == 200)
        #expect(h.pushes.count == 1 && h.pushes[0].pushToken == "apns-token-1")
        let wake = try #require(h.pushes.first?.metadata.objectValue)
        var signed = wake
        let signature = try #require(signed.removeValue(forKey: "signature")?.stringValue)
        let keyID = try #require(signed.removeValue(forKey: "key_id")?.stringValue)
        let key = try #require(h.server.state.manifest.signingKeys[keyID])
        #expect(Ed25519.verify(signature: Base64.decode(signature) ?? [], message: Array(JSONValue.object(signed).canonicalText.utf8),
                               publicKey: Base64.decode(key.publicKey) ?? []))
        let (_, response) = try h.sync(SyncRequest(deviceID: "phone-1"), key: acme)
        let command = try #require(response?.commands.first)
        #expect(command.type == "complete_step" && response?.syncIntervalSecs == 5)
        #expect(command.payload == ["instance_id": .string(Self.instance), "block_id": "payment_approval", "step_name": "payment_approval",
                                    "output": ["value": "approved"]])
        let again = try h.send("POST", "/api/v1/mobile/approvals/\(id)/resolve", ["output": ["value": "approved"]], key: acme)
        #expect(again.status == 404 && again.errorText == "not found: approval \(id) not found or already resolved")
        #expect(try h.send("GET", "/api/v1/mobile/approvals?state=resolved", key: acme).jsonBody?["total"] == 1)
    }

    @Test("a resolution outside the step's choices, a malformed output, a bad id or another tenant's approval is refused")
    func resolveErrors() throws {
        var h = try ServerHarness()
        let (acme, id) = try waitingDevice(&h)
        let globex = try h.tenant("globex")
        let before = h.server.state
        let wrong = try h.send("POST", "/api/v1/mobile/approvals/\(id)/resolve", ["output": ["value": "maybe"]], key: acme)
        #expect(wrong.status == 400 && wrong.errorText.contains("'maybe' is not a choice of payment_approval; its choices: approved, declined"))
        #expect(try h.send("POST", "/api/v1/mobile/approvals/\(id)/resolve", ["output": 5], key: acme).status == 400)
        #expect(try h.send("POST", "/api/v1/mobile/approvals/\(id)/resolve", [:], key: acme).errorText == "invalid argument: output is required")
        let badID = try h.send("POST", "/api/v1/mobile/approvals/not-a-uuid/resolve", ["output": "approved"], key: acme)
        #expect(badID.status == 400 && badID.errorText.contains("is not a UUID"))
        #expect(try h.send("POST", "/api/v1/mobile/approvals/\(id)/resolve", ["output": "approved"], key: globex).status == 404)
        #expect(h.server.state == before, "refused requests change nothing")
        #expect(h.pushes.isEmpty)
    }

    @Test("a pending approval past its timeout_secs is listed as expired and cannot be resolved")
    func expiry() throws {
        var h = try ServerHarness()
        let (acme, id) = try waitingDevice(&h)
        h.now = h.now + .seconds(3601)
        #expect(try h.send("GET", "/api/v1/mobile/approvals?state=expired", key: acme).jsonBody?["total"] == 1)
        #expect(try h.send("POST", "/api/v1/mobile/approvals/\(id)/resolve", ["output": "approved"], key: acme).status == 404)
        #expect(try h.send("GET", "/api/v1/mobile/approvals?state=later", key: acme).status == 400)
    }

    static let commandCases: [(String, JSONValue, Int, String)] = {
        let i = JSONValue.string(instance)
        var cases: [(String, JSONValue, Int, String)] = []
        cases.append(("complete_step", .object(["instance_id": i, "step_name": "gate", "output": ["value": "yes"]]), 201, ""))
        cases.append(("cancel_instance", .object(["instance_id": i]), 201, ""))
        cases.append(("start_workflow", ["sequence_name": "onboarding-flow", "input": ["user": "u"], "dedup_key": "k"], 201, ""))
        cases.append(("update_sequence", .object(["instance_id": i, "policy": "skip_executed"]), 201, ""))
        cases.append(("step_result", .object(["request_id": "r", "instance_id": i, "block_id": "b", "success": false]), 201, ""))
        cases.append(("reboot", [:], 400,
                      "unknown command type 'reboot'; expected one of: complete_step, cancel_instance, start_workflow, update_sequence, step_result"))
        cases.append(("cancel_instance", ["instance_id": "123"], 400, "payload.instance_id is not a UUID: '123'"))
        cases.append(("cancel_instance", [:], 400, "payload.instance_id is required"))
        cases.append(("update_sequence", .object(["instance_id": i, "policy": "yolo"]), 400, "payload.policy 'yolo' is not one of"))
        cases.append(("start_workflow", ["sequence_name": 7], 400, "payload.sequence_name must be a string, found a number"))
        cases.append(("step_result", .object(["request_id": "r", "instance_id": i, "block_id": "b"]), 400, "payload.success is required"))
        return cases
    }()

    @Test("commands: every type is accepted with its payload; unknown types, bad payloads and foreign devices are refused",
          arguments: commandCases)
    func commands(type: String, payload: JSONValue, status: Int, message: String) throws {
        var h = try ServerHarness()
        let acme = try h.tenant("acme")
        _ = try h.register("phone-1", key: acme)
        let reply = try h.send("POST", "/api/v1/mobile/commands", ["device_id": "phone-1", "command_type": .string(type), "payload": payload], key: acme)
        #expect(reply.status == status, "\(reply.errorText)")
        #expect(message.isEmpty || reply.errorText.contains(message), "\(reply.errorText)")
        if status == 201 {
            let (_, response) = try h.sync(SyncRequest(deviceID: "phone-1"), key: acme)
            #expect(response?.commands.first?.type == type && response?.commands.first?.payload == payload)
        }
        let globex = try h.tenant("globex")
        #expect(try h.send("POST", "/api/v1/mobile/commands", ["device_id": "phone-1", "command_type": "cancel_instance",
                                                               "payload": ["instance_id": .string(Self.instance)]], key: globex).status == 404)
    }

    @Test("credentials: the API never shows a secret; a delegation resolves into step_result, once per request id")
    func credentials() throws {
        var h = try ServerHarness()
        let acme = try h.tenant("acme")
        _ = try h.register("phone-1", key: acme)
        let created = try h.send("POST", "/credentials", ["id": "payments-api", "name": "Payments", "kind": "api_key",
                                                          "value": ["token": "sk_live_SECRET", "account": "acct-9"],
                                                          "refresh_token": "rt_SECRET"], key: acme)
        #expect(created.status == 201 && !created.text.contains("SECRET"))
        #expect(created.jsonBody?["has_refresh_token"] == true)
        _ = try h.send("POST", "/credentials", ["id": "plain", "name": "Plain", "kind": "token", "value": "tok_SECRET2"], key: acme)
        let listed = try h.send("GET", "/credentials", key: acme)
        #expect(listed.jsonBody?["total"] == 2 && !listed.text.contains("SECRET"))
        let delegation = StepDelegation(requestID: "req-1", instanceID: Self.instance, blockID: "charge", handler: "process_payment",
                                        params: ["auth": "credentials://payments-api/token", "all": "credentials://plain", "amount": 5])
        var (_, response) = try h.sync(SyncRequest(deviceID: "phone-1", stepDelegations: [delegation, delegation]), key: acme)
        #expect(response?.commands.count == 1, "a repeated request id is resolved once")
        let result = try #require(response?.commands.first)
        #expect(result.type == "step_result" && result.payload["success"] == true && result.payload["handler"] == "process_payment")
        #expect(result.payload["resolved_params"] == ["auth": "sk_live_SECRET", "all": "tok_SECRET2", "amount": 5])
        (_, response) = try h.sync(SyncRequest(deviceID: "phone-1", stepDelegations: [delegation], commandAcks: [result.id]), key: acme)
        #expect(response?.commands.isEmpty == true)

        _ = try h.send("PATCH", "/credentials/plain", ["enabled": false], key: acme)
        for (id, params, reason) in [("req-2", "credentials://plain", "credential plain is disabled"),
                                     ("req-3", "credentials://nope", "credential nope not found"),
                                     ("req-4", "credentials://payments-api/pin", "credential payments-api has no field pin")] {
            let failing = StepDelegation(requestID: id, instanceID: Self.instance, blockID: "charge", handler: "h", params: ["x": .string(params)])
            (_, response) = try h.sync(SyncRequest(deviceID: "phone-1", stepDelegations: [failing]), key: acme)
            let payload = try #require(response?.commands.last?.payload)
            #expect(payload["success"] == false && payload["error"] == .string("credential resolution failed: \(reason)"))
            #expect(payload["resolved_params"] == nil)
        }
        // Another tenant's credentials are not there to resolve.
        let globex = try h.tenant("globex")
        _ = try h.register("phone-2", key: globex)
        let stolen = StepDelegation(requestID: "req-9", instanceID: Self.instance, blockID: "b", handler: "h", params: ["x": "credentials://payments-api"])
        (_, response) = try h.sync(SyncRequest(deviceID: "phone-2", stepDelegations: [stolen]), key: globex)
        #expect(response?.commands.first?.payload["success"] == false)
        #expect(try h.send("GET", "/credentials", key: globex).jsonBody?["total"] == 0)
    }

    @Test("telemetry: up to 500 events are accepted; 501 is 413; an event without a device is 400")
    func telemetry() throws {
        var h = try ServerHarness()
        let acme = try h.tenant("acme")
        let event: JSONValue = ["event_type": "step_completed", "payload": "{}", "timestamp": "2026-01-01T00:00:00Z"]
        let device: JSONValue = ["device_id": "phone-1", "os_name": "iOS", "os_version": "18", "app_version": "1", "sdk_version": "0.7.1"]
        let ok = try h.send("POST", "/telemetry/mobile", ["events": .array(Array(repeating: event, count: 500)), "device": device], key: acme)
        #expect(ok.status == 200 && ok.jsonBody?["accepted"] == 500)
        let big = try h.send("POST", "/telemetry/mobile", ["events": .array(Array(repeating: event, count: 501)), "device": device], key: acme)
        #expect(big.status == 413 && big.errorText == "payload too large: at most 500 events per batch")
        let orphan = try h.send("POST", "/telemetry/mobile", ["events": [event]], key: acme)
        #expect(orphan.status == 400 && orphan.errorText == "invalid argument: events[0].device is required here or on the batch")
        let kept = try h.send("GET", "/api/v1/mobile/devices/phone-1/telemetry?limit=500", key: acme).jsonBody
        #expect(kept?["total"] == 200 && kept?["items"]?.arrayValue?.count == 200, "the server keeps the last 200 per device in memory")
        let report = try h.send("POST", "/telemetry/mobile/errors", ["error_type": "crash", "message": "boom", "device": device], key: acme)
        #expect(report.status == 202)
    }

    @Test("a resolved, delivered approval's rows read back from SQLite as the server held them, with the times the API showed")
    func rowsPersistWithTheirTimes() throws {
        var h = try ServerHarness(sqlite: true)
        let acme = try h.tenant("acme")
        _ = try h.register("phone-1", key: acme, push: nil)
        let gate = ApprovalRequest(instanceID: Self.instance, blockID: "payment_approval", sequenceName: "payment-verification",
                                   prompt: "Approve?", choices: nil, storeAs: nil, timeoutSeconds: nil)
        let status = StatusUpdate(instanceID: Self.instance, sequenceName: "payment-verification", state: "waiting",
                                  currentStep: "payment_approval", handler: nil, timestamp: h.timestamp)
        h.now = h.now + .milliseconds(1_234)
        _ = try h.sync(SyncRequest(deviceID: "phone-1", statusUpdates: [status], approvalRequests: [gate]), key: acme)
        let created = h.timestamp
        let id = try #require(h.server.state.approvals.keys.first)
        h.now = h.now + .seconds(61)
        #expect(try h.send("POST", "/api/v1/mobile/approvals/\(id)/resolve", ["output": ["value": "yes"]], key: acme).status == 200)
        let resolved = h.timestamp
        h.now = h.now + .milliseconds(7)
        let (_, response) = try h.sync(SyncRequest(deviceID: "phone-1"), key: acme)
        let command = try #require(response?.commands.first?.id)
        _ = try h.sync(SyncRequest(deviceID: "phone-1", commandAcks: [command]), key: acme)
        let acked = h.timestamp

        let approval = try #require(try h.send("GET", "/api/v1/mobile/approvals?state=resolved", key: acme).jsonBody?["items"]?.arrayValue?.first)
        #expect(approval["created_at"]?.stringValue == created && approval["resolved_at"]?.stringValue == resolved)
        #expect(h.server.state.commands[command]?.ackedAt == acked && h.server.state.devices["phone-1"]?.lastSyncAt == acked)
        let statuses = try h.send("GET", "/api/v1/mobile/status?device_id=phone-1", key: acme).jsonBody
        #expect(statuses?["items"]?.arrayValue?.first?["updated_at"]?.stringValue == created)

        let reloaded = try #require(try h.store?.load())
        #expect(reloaded == h.server.state)
        #expect(reloaded.approvals[id]?.resolvedAt == resolved && reloaded.commands[command]?.ackedAt == acked)
    }
}

