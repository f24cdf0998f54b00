import DeviceWorkflows
import Orch8Wire
import Foundation
import LabCrypto
import LabKernel
import LabTestSupport
import Testing
@testable import MobileSyncServer
import ServerStorage

@Suite("Sync server: manifests, persistence, bad input")
struct ManifestPersistenceTests {
    static func sequence(_ name: String, version: Int, handler: String = "noop") -> JSONValue {
        ["id": "00000000-0000-0000-0000-000000000009", "tenant_id": "mobile", "namespace": "default", "name": .string(name),
         "version": .number(Double(version)), "blocks": [["type": "step", "id": "only", "handler": .string(handler)]]]
    }

    /// Splits and verifies a manifest body the way the SDK does.
    static func verify(_ body: String, rootKey: [UInt8]) -> JSONValue? {
        guard let newline = body.firstIndex(of: "\n") else { return nil }
        let signature = Base64.decode(String(body[..<newline])) ?? []
        let canonical = String(body[body.index(after: newline)...])
        guard Ed25519.verify(signature: signature, message: Array(canonical.utf8), publicKey: rootKey) else { return nil }
        return try? JSONValue.parse(canonical)
    }

    @Test("a published sequence is listed in a root-signed canonical manifest; its bytes hash and verify; ETag gives 304")
    func publish() throws {
        var h = try ServerHarness()
        let acme = try h.tenant("acme")
        let published = try h.send("POST", "/api/v1/mobile/manifest/sequences",
                                   ["sequence": Self.sequence("greet", version: 1), "min_sdk_version": "0.7.0"], key: acme)
        #expect(published.status == 201, "\(published.errorText)")
        let root = try #require(Base64.decode(try h.send("GET", "/api/v1/mobile/manifest/root-key", key: acme).jsonBody?["public_key"]?.stringValue ?? ""))
        let manifestReply = try h.send("GET", "/acme/manifest.json", headers: ["authorization": "Bearer \(acme)"])
        #expect(manifestReply.status == 200)
        let manifest = try #require(Self.verify(manifestReply.text, rootKey: root))
        let canonical = String(manifestReply.text.split(separator: "\n", maxSplits: 1)[1])
        #expect(canonical == manifest.canonicalText, "the signed text is canonical JSON")
        let entry = try #require(manifest["sequences"]?.arrayValue?.first)
        #expect(entry["name"] == "greet" && entry["version"] == 1 && entry["required_handlers"] == ["noop"] && entry["min_sdk_version"] == "0.7.0")
        let url = try #require(entry["url"]?.stringValue)
        #expect(url.hasPrefix("http://127.0.0.1:7710/acme/sequences/"))
        let path = String(url.dropFirst("http://127.0.0.1:7710".count))
        let bytes = try h.send("GET", path, key: acme).body
        #expect(SHA256.hash(bytes).hexString == entry["sha256"]?.stringValue)
        let signature = Base64.decode(try h.send("GET", path.replacingOccurrences(of: ".json", with: ".sig"), key: acme).text) ?? []
        let keyID = try #require(entry["signing_key_id"]?.stringValue)
        let signingKey = try #require(manifest["signing_keys"]?.arrayValue?.first { $0["key_id"]?.stringValue == keyID }?["public_key"]?.stringValue)
        #expect(Ed25519.verify(signature: signature, message: bytes, publicKey: Base64.decode(signingKey) ?? []))
        let etag = try #require(manifestReply.header("ETag"))
        #expect(try h.send("GET", "/acme/manifest.json", key: acme, headers: ["if-none-match": etag]).status == 304)
        // Another tenant sees neither the manifest nor the file.
        let globex = try h.tenant("globex")
        #expect(try h.send("GET", "/acme/manifest.json", key: globex).status == 404)
        #expect(try h.send("GET", path, key: globex).status == 404)
        #expect(try h.send("GET", "/acme/manifest.json").status == 401)
    }

    @Test("versions only go up; removal, rotation and revocation each bump manifest_version; revoked keys leave and re-sign")
    func lifecycle() throws {
        var h = try ServerHarness()
        let acme = try h.tenant("acme")
        func manifest() throws -> JSONValue {
            let text = try h.send("GET", "/acme/manifest.json", key: acme).text
            return try JSONValue.parse(String(text.split(separator: "\n", maxSplits: 1)[1]))
        }
        #expect(try h.send("POST", "/api/v1/mobile/manifest/sequences", ["sequence": Self.sequence("greet", version: 2)], key: acme).status == 201)
        let stale = try h.send("POST", "/api/v1/mobile/manifest/sequences", ["sequence": Self.sequence("greet", version: 2)], key: acme)
        #expect(stale.status == 409 && stale.errorText.contains("not newer than the published version 2"))
        let v1 = try manifest()["manifest_version"]?.numberValue ?? 0
        h.now = h.now + .seconds(1)
        _ = try h.send("POST", "/api/v1/mobile/manifest/sequences", ["sequence": Self.sequence("bye", version: 1)], key: acme)
        #expect(try h.send("DELETE", "/api/v1/mobile/manifest/sequences/bye", key: acme).status == 200)
        let afterRemove = try manifest()
        #expect((afterRemove["manifest_version"]?.numberValue ?? 0) > v1)
        #expect(afterRemove["removed"]?.arrayValue?.first?["name"] == "bye")
        #expect(afterRemove["sequences"]?.arrayValue?.count == 1)
        let oldKey = try #require(afterRemove["signing_keys"]?.arrayValue?.first?["key_id"]?.stringValue)
        #expect(try h.send("POST", "/api/v1/mobile/manifest/keys", key: acme).status == 403, "key management is for the root key")
        #expect(try h.send("POST", "/api/v1/mobile/manifest/keys", key: h.root).status == 201)
        #expect(try h.send("DELETE", "/api/v1/mobile/manifest/keys/\(oldKey)", key: h.root).status == 200)
        let afterRevoke = try manifest()
        let keys = afterRevoke["signing_keys"]?.arrayValue?.compactMap { $0["key_id"]?.stringValue } ?? []
        #expect(!keys.contains(oldKey) && keys.count == 1)
        #expect(afterRevoke["sequences"]?.arrayValue?.first?["signing_key_id"]?.stringValue == keys.first)
        #expect((afterRevoke["manifest_version"]?.numberValue ?? 0) > (afterRemove["manifest_version"]?.numberValue ?? 0))
        let bad = try h.send("POST", "/api/v1/mobile/manifest/sequences", ["sequence": ["name": "x", "blocks": []]], key: acme)
        #expect(bad.status == 400 && bad.errorText.hasPrefix("invalid argument: the sequence is not valid"))
        #expect(try h.send("POST", "/api/v1/mobile/manifest/sequences", ["sequence": Self.sequence("z", version: 1), "min_sdk_version": "1.x"],
                           key: acme).status == 400)
    }

    @Test("every change reaches SQLite: the loaded state equals the live one, and a restarted server keeps its keys")
    func persistence() throws {
        var h = try ServerHarness(sqlite: true)
        let acme = try h.tenant("acme")
        _ = try h.register("phone-1", key: acme, push: "tok")
        let id = ServerHarness.uuid(5)
        _ = try h.sync(SyncRequest(deviceID: "phone-1",
                                   statusUpdates: [StatusUpdate(instanceID: id, sequenceName: "s", state: "Waiting", currentStep: "g", handler: nil,
                                                                timestamp: "2026-01-01T00:00:00Z", steps: [["block_id": "g"]])],
                                   approvalRequests: [ApprovalRequest(instanceID: id, blockID: "g", sequenceName: "s", prompt: "p",
                                                                      choices: nil, storeAs: nil, timeoutSeconds: 60)]), key: acme)
        let approval = try #require(h.server.state.approvals.keys.first)
        _ = try h.send("POST", "/api/v1/mobile/approvals/\(approval)/resolve", ["output": "yes"], key: acme)
        _ = try h.send("POST", "/credentials", ["id": "c1", "name": "n", "kind": "api_key", "value": "v"], key: acme)
        _ = try h.send("POST", "/telemetry/mobile", ["events": [["event_type": "e", "payload": "p", "timestamp": "t"]],
                                                     "device": ["device_id": "phone-1"]], key: acme)
        _ = try h.send("POST", "/api/v1/mobile/manifest/sequences", ["sequence": Self.sequence("greet", version: 1)], key: acme)
        let (_, response) = try h.sync(SyncRequest(deviceID: "phone-1"), key: acme)
        _ = try h.sync(SyncRequest(deviceID: "phone-1", commandAcks: response?.commands.map(\.id) ?? []), key: acme)
        let loaded = try #require(try h.store?.load())
        #expect(loaded == h.server.state)
        var restarted = SyncServer(state: loaded, config: h.server.config, seed: StreamSeed(1), wallClock: .simulationEpoch)
        #expect(restarted.bootstrap(now: h.now) == h.root)
        let devices = restarted.handle(HTTPRequestMessage(method: "GET", target: "/api/v1/mobile/devices", headers: ["x-api-key": acme]), now: h.now)
        #expect(devices.response.jsonBody?["total"] == 1)
    }

    static let badRequests: [(String, String, String, Int, String)] = [
        ("POST", "/api/v1/mobile/sync", "{not json", 400, "invalid argument: the body is not valid JSON"),
        ("POST", "/api/v1/mobile/sync", "", 400, "invalid argument: the body is empty"),
        ("POST", "/api/v1/mobile/sync", "[1,2]", 400, "invalid argument: the body must be a JSON object, found an array"),
        ("POST", "/api/v1/mobile/sync", #"{"device_id": 5}"#, 400, "invalid argument: device_id must be a string, found a number"),
        ("POST", "/api/v1/mobile/sync", #"{"device_id": "phone-1", "status_updates": {}}"#, 400, "status_updates must be an array, found an object"),
        ("POST", "/api/v1/mobile/sync", #"{"device_id": "phone-1", "status_updates": [{"instance_id": "x", "state": "Running", "timestamp": "2026-01-01T00:00:00Z"}]}"#,
         400, "invalid argument: status_updates[0].instance_id is not a UUID: 'x'"),
        ("POST", "/api/v1/mobile/sync", #"{"device_id": "phone-1", "status_updates": [{"instance_id": "00000000-0000-4000-8000-000000000001", "state": "Running"}]}"#,
         400, "invalid argument: status_updates[0].timestamp is required"),
        ("POST", "/api/v1/mobile/sync", #"{"device_id": "phone-1", "status_updates": [{"instance_id": "00000000-0000-4000-8000-000000000001", "state": "Running", "timestamp": "yesterday"}]}"#,
         400, "is not an RFC 3339 time"),
        ("POST", "/api/v1/mobile/sync", #"{"device_id": "phone-1", "command_acks": [1]}"#, 400, "command_acks[0] must be a command id string, found a number"),
        ("POST", "/api/v1/mobile/sync", #"{"device_id": "phone-1", "approval_requests": [{"instance_id": "00000000-0000-4000-8000-000000000001", "block_id": "g", "choices": [{"label": "x"}]}]}"#,
         400, "approval_requests[0].choices[0].value is required"),
        ("POST", "/api/v1/mobile/devices/register", #"{"device_id": "", "platform": "ios"}"#, 400, "invalid argument: device_id must not be empty"),
        ("POST", "/api/v1/mobile/devices/register", #"{"device_id": "d"}"#, 400, "invalid argument: platform is required"),
        ("GET", "/api/v1/mobile/devices?limit=-3", "", 400, "limit must be a positive integer"),
        ("POST", "/api/v1/mobile/commands", #"{"device_id": "phone-1", "command_type": "complete_step", "payload": "x"}"#, 400, "payload must be a JSON object"),
        ("POST", "/credentials", #"{"name": "n", "kind": "k"}"#, 400, "value is required"),
        ("PATCH", "/credentials/none", #"{"enabled": true}"#, 404, "not found: credential none not found"),
    ]

    @Test("bad input gets a precise 4xx JSON error and changes nothing", arguments: badRequests)
    func badInput(method: String, target: String, body: String, status: Int, message: String) throws {
        var h = try ServerHarness()
        let acme = try h.tenant("acme")
        _ = try h.register("phone-1", key: acme)
        let before = h.server.state
        let reply = h.raw(method, target, body: body, key: acme)
        #expect(reply.status == status, "\(reply.errorText)")
        #expect(reply.header("Content-Type") == "application/json")
        #expect(reply.errorText.contains(message), "\(reply.errorText)")
        #expect(h.server.state == before)
    }

    @Test("more than 500 items in any sync array is the real server's 400")
    func oversized() throws {
        var h = try ServerHarness()
        let acme = try h.tenant("acme")
        _ = try h.register("phone-1", key: acme)
        let acks = SyncRequest(deviceID: "phone-1", commandAcks: (0..<501).map { "c\($0)" })
        let reply = try h.send("POST", "/api/v1/mobile/sync", acks.json, key: acme)
        #expect(reply.status == 400 && reply.errorText == "invalid argument: sync arrays must each contain at most 500 items")
    }
}
