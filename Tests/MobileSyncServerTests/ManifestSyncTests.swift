import DeviceWorkflows
import WorkflowHost
import Orch8Wire
import Foundation
import LabCrypto
import LabKernel
import LabTestSupport
import Testing
@testable import MobileSyncServer

@Suite("Device manifest sync against the publisher")
struct ManifestSyncTests {
    struct Rig {
        var server: ServerHarness
        var device: EngineHost<InMemoryWorkflowStore>
        var key: String
        /// Rewrites a fetched body (tampering, corruption).
        var tamper: ((String, [UInt8]) -> [UInt8])?

        init(sdk: String = "0.7.1", maxStored: UInt32 = 50) throws {
            server = try ServerHarness()
            key = try server.tenant("acme")
            let root = try server.send("GET", "/api/v1/mobile/manifest/root-key", key: key).jsonBody?["public_key"]?.stringValue ?? ""
            var config = MobileEngineConfig()
            config.rootPublicKey = root
            config.sdkVersion = sdk
            config.maxStoredSequences = maxStored
            device = EngineHost(engine: MobileEngine(config: config, handlers: BuiltinHandlers.names, seed: StreamSeed(1)),
                                store: InMemoryWorkflowStore())
        }

        mutating func publish(_ name: String, version: Int, handler: String = "noop", minSDK: String = "0.1.0") throws {
            let reply = try server.send("POST", "/api/v1/mobile/manifest/sequences",
                                        ["sequence": ManifestPersistenceTests.sequence(name, version: version, handler: handler),
                                         "min_sdk_version": .string(minSDK)], key: key)
            #expect(reply.status == 201, "\(reply.errorText)")
            server.now = server.now + .seconds(1)
        }

        mutating func sync() throws(ManifestSyncError) -> ManifestSyncResult {
            var server = self.server
            let tamper = self.tamper
            defer { self.server = server }
            return try device.syncManifest(url: "http://127.0.0.1:7710/acme/manifest.json", token: key) { fetch in
                let path = String(fetch.url.dropFirst("http://127.0.0.1:7710".count))
                let reply = try server.send("GET", path, headers: fetch.headers)
                let body = tamper?(path, reply.body) ?? reply.body
                return ManifestFetchReply(status: reply.status, headers: Dictionary(reply.headers.map { ($0.name, $0.value) },
                                                                                   uniquingKeysWith: { _, b in b }), body: body)
            }
        }
    }

    @Test("added, updated, unchanged (304), removed: the SDK's SyncResult at each step")
    func lifecycle() throws {
        var rig = try Rig()
        try rig.publish("greet", version: 1)
        try rig.publish("bye", version: 1)
        var result = try rig.sync()
        #expect(result.added == 2 && result.updated == 0 && result.signatureFailures == 0)
        #expect(rig.device.engine.sequence(named: "greet")?.version == 1)
        #expect(try rig.sync() == ManifestSyncResult(), "an unchanged manifest is a 304")
        try rig.publish("greet", version: 2)
        _ = try rig.server.send("DELETE", "/api/v1/mobile/manifest/sequences/bye", key: rig.key)
        result = try rig.sync()
        #expect(result.updated == 1 && result.removed == 1 && result.added == 0)
        #expect(rig.device.engine.sequence(named: "greet")?.version == 2 && rig.device.engine.sequence(named: "bye") == nil)
        #expect(try rig.device.store.syncValue("manifest_version") == String(rig.server.server.state.manifest.versions["acme"] ?? 0))
    }

    @Test("handlers the app lacks or a newer SDK skip a sequence; the others still load")
    func skips() throws {
        var rig = try Rig(sdk: "0.7.1")
        try rig.publish("needs-camera", version: 1, handler: "scan_document")
        try rig.publish("future", version: 1, minSDK: "0.9.0")
        try rig.publish("ok", version: 1, minSDK: "0.7.1")
        let result = try rig.sync()
        #expect(result.skipped == 2 && result.added == 1 && rig.device.engine.sequence(named: "ok") != nil)
    }

    @Test("a tampered manifest is refused; a tampered or corrupt sequence counts as a signature failure and is not loaded")
    func tampering() throws {
        var rig = try Rig()
        try rig.publish("greet", version: 1)
        try rig.publish("bye", version: 1)
        rig.tamper = { path, body in path.hasSuffix("manifest.json") ? body.map { $0 == UInt8(ascii: "1") ? UInt8(ascii: "2") : $0 } : body }
        #expect(throws: ManifestSyncError.self) { try rig.sync() }
        var bye = ""
        rig.tamper = { path, body in
            guard path.hasSuffix(".json"), !path.hasSuffix("manifest.json"), String(decoding: body, as: UTF8.self).contains("\"bye\"") else { return body }
            bye = path
            return Array(String(decoding: body, as: UTF8.self).replacingOccurrences(of: "noop", with: "echo").utf8)
        }
        let result = try rig.sync()
        #expect(!bye.isEmpty && result.signatureFailures == 1 && result.added == 1)
        #expect(rig.device.engine.sequence(named: "bye") == nil && rig.device.engine.sequence(named: "greet") != nil)
    }

    @Test("a replayed older manifest changes nothing; a revoked signing key is gone and re-signed sequences still verify")
    func replayAndRotation() throws {
        var rig = try Rig()
        try rig.publish("greet", version: 1)
        let old = try rig.server.send("GET", "/acme/manifest.json", key: rig.key).body
        _ = try rig.sync()
        try rig.publish("greet", version: 2)
        _ = try rig.sync()
        rig.device.store = InMemoryWorkflowStore() // forget the ETag, keep the version: a replay must still be refused
        try rig.device.store.setSyncValue("manifest_version", String(rig.server.server.state.manifest.versions["acme"] ?? 0))
        rig.tamper = { path, body in path.hasSuffix("manifest.json") ? old : body }
        #expect(try rig.sync() == ManifestSyncResult())
        rig.tamper = nil
        let keys = try rig.server.send("GET", "/api/v1/mobile/manifest/keys", key: rig.server.root).jsonBody?["items"]?.arrayValue ?? []
        let oldKey = try #require(keys.first?["key_id"]?.stringValue)
        _ = try rig.server.send("POST", "/api/v1/mobile/manifest/keys", key: rig.server.root)
        _ = try rig.server.send("DELETE", "/api/v1/mobile/manifest/keys/\(oldKey)", key: rig.server.root)
        try rig.publish("greet", version: 3)
        let result = try rig.sync()
        #expect(result.updated == 1 && rig.device.engine.sequence(named: "greet")?.version == 3)
        let cached = try #require(try rig.device.store.syncValue("manifest_signing_keys"))
        #expect(!cached.contains(oldKey))
    }

    @Test("beyond maxStoredSequences the oldest unused sequence is evicted; a root key that is neither hex nor base64 is not configured")
    func evictionAndConfig() throws {
        var rig = try Rig(maxStored: 2)
        for name in ["a", "b", "c"] { try rig.publish(name, version: 1) }
        _ = try rig.sync()
        #expect(rig.device.engine.loadedSequences().count == 2)
        var config = MobileEngineConfig()
        config.rootPublicKey = "not a key"
        var unconfigured = EngineHost(engine: MobileEngine(config: config, handlers: [], seed: StreamSeed(1)), store: InMemoryWorkflowStore())
        #expect(throws: ManifestSyncError.notConfigured) {
            try unconfigured.syncManifest(url: "x", token: nil) { _ in ManifestFetchReply(status: 200, body: []) }
        }
    }

    @Test("the root key in hex (the seed's spelling) verifies like base64; an empty key turns verification off, with a warning")
    func rootKeyForms() throws {
        var rig = try Rig()
        try rig.publish("greet", version: 1)
        let base64 = rig.device.engine.config.rootPublicKey
        var hexConfig = rig.device.engine.config
        hexConfig.rootPublicKey = try #require(Base64.decode(base64)).hexString
        rig.device = EngineHost(engine: MobileEngine(config: hexConfig, handlers: BuiltinHandlers.names, seed: StreamSeed(1)), store: InMemoryWorkflowStore())
        var result = try rig.sync()
        #expect(result.added == 1 && result.signatureFailures == 0 && result.warnings.isEmpty)

        // A manifest signed by someone else: refused under the key, accepted with it off.
        rig.tamper = { path, body in
            guard path.hasSuffix("manifest.json"), let newline = body.firstIndex(of: UInt8(ascii: "\n")) else { return body }
            return Array(Base64.encode([UInt8](repeating: 7, count: 64)).utf8) + body[newline...]
        }
        try rig.publish("bye", version: 1)
        #expect(throws: ManifestSyncError.self) { try rig.sync() }
        var offConfig = hexConfig
        offConfig.rootPublicKey = ""
        rig.device = EngineHost(engine: MobileEngine(config: offConfig, handlers: BuiltinHandlers.names, seed: StreamSeed(1)), store: InMemoryWorkflowStore())
        result = try rig.sync()
        #expect(result.added == 2, "verification off: the forged signature is not checked")
        #expect(result.warnings.count == 1 && result.warnings[0].contains("verification is off"))
    }
}
