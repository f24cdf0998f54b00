import DeviceWorkflows
import Orch8Wire
import LabKernel
import LabTestSupport
import Testing
@testable import MobileSyncServer

/// Hostile requests at every route of the sync server core, from one seed: every answer
/// must be a 2xx, 3xx (a manifest's 304) or 4xx. A trap ends the test process.
/// `FLEETLAB_FUZZ_REQUESTS=200000 swift test --filter SyncServerFuzzTests` runs it longer.
@Suite("Sync server: fuzzed requests")
struct SyncServerFuzzTests {
    static let instance = ServerHarness.uuid(1)

    static let sequence: JSONValue = [
        "name": "fuzzed", "version": 2,
        "blocks": [["type": "step", "id": "a", "handler": "noop", "when": "x[2] == 1", "timeout": 5000,
                    "retry": ["max_attempts": 3, "initial_backoff": 100, "max_backoff": 1000],
                    "wait_for_input": ["prompt": "ok?", "timeout": 60000, "choices": [["label": "Yes", "value": "yes"]]]],
                   ["type": "router", "id": "r", "routes": [["condition": "a == 'yes'", "blocks": [["type": "step", "id": "b", "handler": "noop"]]]],
                    "default": [["type": "loop", "id": "l", "condition": "true", "max_iterations": 3, "body": [["type": "step", "id": "c", "handler": "noop"]]]]],
                   ["type": "a_b_split", "id": "ab", "variants": [["name": "x", "weight": 1, "blocks": [["type": "step", "id": "d", "handler": "noop"]]]]],
                   ["type": "sub_sequence", "id": "sub", "sequence_name": "other", "version": 1]],
    ]

    static let routes: [RequestFuzzer.Route] = [
        .init("POST", "/api/v1/mobile/sync", SyncRequest(
            deviceID: "phone-1",
            statusUpdates: [StatusUpdate(instanceID: instance, sequenceName: "s", state: "Running", currentStep: "a", handler: "noop",
                                         timestamp: "2026-01-01T00:00:00Z", steps: [["block_id": "a", "state": "running"]])],
            approvalRequests: [ApprovalRequest(instanceID: instance, blockID: "a", sequenceName: "s", prompt: "ok?",
                                               choices: [["label": "Yes", "value": "yes"]], storeAs: "x", timeoutSeconds: 60)],
            stepDelegations: [StepDelegation(requestID: "r1", instanceID: instance, blockID: "a", handler: "noop",
                                             params: ["key": "credentials://api/token"])],
            commandAcks: ["{command}"]).json),
        .init("POST", "/mobile/sync", ["device_id": "phone-1"]),
        .init("POST", "/api/v1/mobile/devices/register", ["device_id": "phone-2", "platform": "ios", "push_token": "t", "app_version": "1.0"]),
        .init("GET", "/api/v1/mobile/devices", query: ["tenant_id", "limit"]),
        .init("GET", "/api/v1/mobile/approvals", query: ["state", "device_id", "tenant_id", "limit"]),
        .init("POST", "/api/v1/mobile/approvals/{approval}/resolve", ["output": ["value": "yes"]]),
        .init("GET", "/api/v1/mobile/status", query: ["device_id", "tenant_id", "limit"]),
        .init("POST", "/api/v1/mobile/commands", ["device_id": "phone-1", "command_type": "start_workflow",
                                                 "payload": ["sequence_name": "s", "input": [:], "dedup_key": "k"]]),
        .init("POST", "/api/v1/mobile/commands", ["device_id": "phone-1", "command_type": "update_sequence",
                                                 "payload": ["instance_id": .string(instance), "policy": "graceful"]]),
        .init("GET", "/api/v1/mobile/tenants"),
        .init("POST", "/api/v1/mobile/tenants", ["tenant_id": "other"]),
        .init("POST", "/api/v1/mobile/manifest/sequences", ["sequence": sequence, "required_handlers": ["noop"], "min_sdk_version": "0.1.0"]),
        .init("DELETE", "/api/v1/mobile/manifest/sequences/{sequence}"),
        .init("GET", "/api/v1/mobile/manifest/keys"),
        .init("POST", "/api/v1/mobile/manifest/keys"),
        .init("DELETE", "/api/v1/mobile/manifest/keys/{key}"),
        .init("GET", "/api/v1/mobile/manifest/root-key"),
        .init("GET", "/{tenant}/manifest.json"),
        .init("GET", "/{tenant}/sequences/{file}"),
        .init("GET", "/api/v1/credentials"),
        .init("POST", "/api/v1/credentials", ["id": "api", "name": "API", "kind": "api_key", "value": ["token": "s3cret"],
                                             "expires_at": "2030-01-01T00:00:00Z", "enabled": true]),
        .init("PATCH", "/api/v1/credentials/{credential}", ["enabled": false, "value": "x", "expires_at": "2031-01-01T00:00:00Z"]),
        .init("POST", "/api/v1/telemetry/mobile", ["events": [["event_type": "step_started", "payload": "{}", "timestamp": "2026-01-01T00:00:00Z"]],
                                                  "device": ["device_id": "phone-1"]]),
        .init("POST", "/api/v1/telemetry/mobile/errors", ["error_type": "crash", "message": "m", "device": ["device_id": "phone-1"]]),
        .init("GET", "/api/v1/mobile/telemetry", query: ["device_id", "limit"]),
        .init("GET", "/api/v1/mobile/devices/phone-1/telemetry", query: ["limit"]),
        .init("GET", "/api/v1/mobile/push/stream", query: ["device_id"]),
        .init("GET", "/{tenant}/sequences.json"),
        .init("GET", "/dashboard/mobile-sync"),
        .init("GET", "/dashboard/mobile-sync/session"),
        .init("POST", "/dashboard/mobile-sync/session", ["key": "fl_root_guess"]),
        .init("POST", "/dashboard/mobile-sync/session/end"),
    ]

    struct Fixture {
        var h: ServerHarness
        var keys: [String]

        init(fuzzer: inout RequestFuzzer) throws {
            h = try ServerHarness()
            let acme = try h.tenant("acme")
            keys = [h.root, acme, try h.tenant("globex")]
            _ = try h.register("phone-1", key: acme, push: "push-token")
            let instance = SyncServerFuzzTests.instance
            _ = try h.sync(SyncRequest(deviceID: "phone-1", statusUpdates: [], approvalRequests: [
                ApprovalRequest(instanceID: instance, blockID: "a", sequenceName: "s", prompt: "ok?", choices: nil, storeAs: nil, timeoutSeconds: 3_600),
            ], stepDelegations: [], commandAcks: []), key: acme)
            _ = try h.send("POST", "/api/v1/credentials", ["id": "api", "name": "API", "kind": "api_key", "value": ["token": "s3cret"]], key: acme)
            let published = try h.send("POST", "/api/v1/mobile/manifest/sequences", ["sequence": SyncServerFuzzTests.sequence], key: acme)
            let command = try h.send("POST", "/api/v1/mobile/commands", ["device_id": "phone-1", "command_type": "cancel_instance",
                                                                        "payload": ["instance_id": .string(instance)]], key: acme)
            fuzzer.holes = [
                "approval": h.server.state.approvals.keys.sorted(), "command": [command.jsonBody?["id"]?.stringValue ?? ""],
                "sequence": ["fuzzed"], "key": h.server.state.manifest.signingKeys.keys.sorted(), "tenant": ["acme", "_", "globex"],
                "file": [(published.jsonBody?["sha256"]?.stringValue ?? "") + ".json", (published.jsonBody?["sha256"]?.stringValue ?? "") + ".sig"],
                "credential": ["api"], "device_id": ["phone-1"], "tenant_id": ["acme"], "state": ["pending", "resolved", "expired"],
            ]
        }
    }

    @Test("every field of every route's body, set to every edge value, is answered 2xx or 4xx", .timeLimit(.minutes(5)))
    func sweep() throws {
        var fuzzer = RequestFuzzer(defaultSeed: 0x5C)
        var fixture: Fixture?
        let outcome = try fuzzer.sweep(Self.routes) { fuzzer in
            fixture = try Fixture(fuzzer: &fuzzer)
            return ["x-api-key": fixture!.keys[1]]
        } send: { request in
            fixture!.h.now = fixture!.h.now + .milliseconds(10)
            return fixture!.h.server.handle(request, now: fixture!.h.now).response
        }
        #expect(outcome.failures.isEmpty, "\(outcome.failures.prefix(5))")
        #expect(outcome.sent > 10_000)
    }

    @Test("every answer to a hostile request is a 2xx, 304 or 4xx", .timeLimit(.minutes(5)))
    func requests() throws {
        var fuzzer = RequestFuzzer(defaultSeed: 0x5C)
        var fixture: Fixture?
        let outcome = try fuzzer.random(Self.routes, count: RequestFuzzer.count(default: 10_000), resetEvery: 200) { fuzzer in
            fixture = try Fixture(fuzzer: &fuzzer)
        } headers: { fuzzer in
            var headers: [String: String] = [:]
            if fuzzer.percent(95) { headers["x-api-key"] = fuzzer.percent(95) ? fuzzer.pick(fixture!.keys) : "fl_" + fuzzer.generator.token(6) }
            if fuzzer.percent(10) { headers["x-tenant-id"] = fuzzer.pick(["acme", "globex", "", "nobody"]) }
            if fuzzer.percent(10) { headers["x-device-id"] = fuzzer.pick(["phone-1", "phone-2", ""]) }
            return headers
        } send: { request in
            fixture!.h.now = fixture!.h.now + .milliseconds(Int64(request.body.count % 2_000))
            return fixture!.h.server.handle(request, now: fixture!.h.now).response
        }
        #expect(outcome.failures.isEmpty, "\(outcome.failures.prefix(5))")
    }
}
