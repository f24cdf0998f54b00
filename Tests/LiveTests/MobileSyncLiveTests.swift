import DeviceWorkflows
import Orch8Wire
import Foundation
import LabKernel
import LabTestSupport
import Testing
@testable import Live

@Suite("Mobile sync over real HTTP")
struct MobileSyncLiveTests {
    func run(_ server: MobileSyncLiveServer, _ body: (String) async throws -> Void) async throws {
        let host = LiveHost(configuration: .init(ports: [server.name: 0]), servers: [server])
        let base = try #require(try await host.start().first).url
        do { try await body(base) } catch {
            try? await host.stop()
            throw error
        }
        try await host.stop()
    }

    func json(_ value: JSONValue) -> Data { Data(value.canonicalText.utf8) }

    @Test("register, sync, resolve over loopback; a restart over the same data keeps every row and the key")
    func roundTrip() async throws {
        let data = TestPaths.scratchDirectory("mobile-sync-live").path
        let server = try MobileSyncLiveServer(dataDirectory: data, seed: 5)
        let key = server.rootAPIKey
        let auth = ["x-api-key": key, "content-type": "application/json"]
        let instance = "00000000-0000-4000-8000-000000000042"
        try await run(server) { base in
            let register = try await HTTPProbe.request("POST", base + "/api/v1/mobile/devices/register",
                                                       body: json(["device_id": "phone-1", "platform": "android"]), headers: auth)
            #expect(register.status == 201 && register.body.isEmpty)
            let gate = ApprovalRequest(instanceID: instance, blockID: "gate", sequenceName: "s", prompt: "ok?", choices: nil, storeAs: nil,
                                       timeoutSeconds: nil)
            let sync = try await HTTPProbe.request("POST", base + "/api/v1/mobile/sync",
                                                   body: json(SyncRequest(deviceID: "phone-1", approvalRequests: [gate]).json), headers: auth)
            #expect(sync.status == 200 && sync.text == #"{"commands":[],"sync_interval_secs":30}"#)
            let pending = try await HTTPProbe.request("GET", base + "/api/v1/mobile/approvals?state=pending", headers: auth)
            let id = try #require(((pending.json as? [String: Any])?["items"] as? [[String: Any]])?.first?["id"] as? String)
            let resolve = try await HTTPProbe.request("POST", base + "/api/v1/mobile/approvals/\(id)/resolve",
                                                      body: json(["output": ["value": "yes"]]), headers: auth)
            #expect(resolve.status == 200)
            let bad = try await HTTPProbe.request("POST", base + "/api/v1/mobile/sync", body: Data("{oops".utf8), headers: auth)
            #expect(bad.status == 400 && bad.headers["content-type"] == "application/json" && bad.text.contains("invalid argument"))
            let anonymous = try await HTTPProbe.request("GET", base + "/api/v1/mobile/devices")
            #expect(anonymous.status == 401)
        }
        let restarted = try MobileSyncLiveServer(dataDirectory: data, seed: 6)
        #expect(restarted.rootAPIKey == key)
        try await run(restarted) { base in
            let sync = try await HTTPProbe.request("POST", base + "/api/v1/mobile/sync",
                                                   body: json(SyncRequest(deviceID: "phone-1").json), headers: auth)
            let response = try SyncResponse(json: try JSONValue.parse(sync.text))
            #expect(response.commands.first?.type == "complete_step" && response.syncIntervalSecs == 5)
            #expect(response.commands.first?.payload["output"] == ["value": "yes"])
        }
    }

    @Test("the sealing key is a file only its owner reads; the database alone holds no root key, tenant key or credential")
    func secretsOnDisk() async throws {
        let data = TestPaths.scratchDirectory("mobile-sync-secrets").path
        let server = try MobileSyncLiveServer(dataDirectory: data, seed: 8)
        let key = server.rootAPIKey
        var tenantKey = ""
        try await run(server) { base in
            let tenant = try await HTTPProbe.request("POST", base + "/api/v1/mobile/tenants", body: json(["tenant_id": "acme"]),
                                                     headers: ["x-api-key": key])
            tenantKey = ((tenant.json as? [String: Any])?["api_key"] as? String) ?? ""
            let credential = try await HTTPProbe.request("POST", base + "/credentials", body: json(["id": "c", "name": "C", "kind": "api_key",
                                                                                                   "value": "sk_live_DISKCHECK"]),
                                                         headers: ["x-api-key": tenantKey])
            #expect(credential.status == 201)
        }
        let keyFile = data + "/mobile-sync.key"
        let mode = try FileManager.default.attributesOfItem(atPath: keyFile)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        // Everything SQLite wrote, main file and write-ahead log alike.
        let files = try FileManager.default.contentsOfDirectory(atPath: data).filter { $0.hasPrefix("mobile-sync.sqlite") }
        let bytes = try files.reduce(Data()) { $0 + (try Data(contentsOf: URL(fileURLWithPath: data + "/" + $1))) }
        for secret in [key, tenantKey, "sk_live_DISKCHECK"] {
            #expect(bytes.range(of: Data(secret.utf8)) == nil, "\(secret.prefix(10))… is on disk in plain text")
        }
        let restarted = try MobileSyncLiveServer(dataDirectory: data, seed: 9)
        #expect(restarted.rootAPIKey == key, "the key file opens what the database sealed")
    }

    @Test("a body over the limit is 413 before the core sees it")
    func tooLarge() async throws {
        let server = try MobileSyncLiveServer(dataDirectory: TestPaths.scratchDirectory("mobile-sync-big").path, seed: 1)
        try await run(server) { base in
            let big = Data(repeating: UInt8(ascii: "a"), count: 9 << 20)
            let reply = try await HTTPProbe.request("POST", base + "/api/v1/mobile/sync", body: big, headers: ["x-api-key": server.rootAPIKey])
            #expect(reply.status == 413 && reply.text.contains("payload too large"))
        }
    }
}
