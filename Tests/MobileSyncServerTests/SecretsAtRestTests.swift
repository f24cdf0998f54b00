import DeviceWorkflows
import Orch8Wire
import Foundation
import LabCrypto
import LabKernel
import LabStore
import Testing
@testable import MobileSyncServer
import ServerStorage

@Suite("Sync server: secrets at rest")
struct SecretsAtRestTests {
    static let sealingKey = try! SecretKey32(bytes: Array(repeating: 0x5A, count: 32))

    /// Every text cell of every table, for looking for a secret in the raw file.
    static func everyCell(_ store: SQLiteSyncServerStore) throws -> [String] {
        let tables = try store.database.query("SELECT name FROM sqlite_master WHERE type = 'table'").compactMap { $0[0].text }
        return try tables.flatMap { try store.database.query("SELECT * FROM \($0)").flatMap { $0.compactMap(\.text) } }
    }

    @Test("tenant keys are stored as hashes; credential values, refresh tokens, signing seeds and the root key are sealed; a reload opens them")
    func sealed() throws {
        var h = try ServerHarness(sqlite: true, sealingKey: Self.sealingKey)
        let acme = try h.tenant("acme")
        let created = try h.send("POST", "/credentials", ["id": "stripe", "name": "Stripe", "kind": "api_key",
                                                          "value": ["token": "sk_live_SECRET123"], "refresh_token": "rt_SECRET456"], key: acme)
        #expect(created.status == 201)
        let store = try #require(h.store)
        let cells = try Self.everyCell(store).joined(separator: "\n")
        let seeds = h.server.state.manifest.signingKeys.values.map(\.seedHex) + [h.server.state.meta[SyncServer.manifestRootSeedMeta] ?? "?"]
        for secret in [acme, h.root, "sk_live_SECRET123", "rt_SECRET456"] + seeds {
            #expect(!cells.contains(secret), "\(secret.prefix(12))… is in the database file in plain text")
        }
        #expect(cells.contains(SyncServer.keyHash(acme)), "the tenant key's hash is what is stored")

        let reloaded = try SQLiteSyncServerStore(path: store.database.path, sealingKey: Self.sealingKey).load()
        #expect(reloaded == h.server.state)
        #expect(reloaded.tenant(forKey: acme) == "acme" && reloaded.tenant(forKey: acme + "x") == nil)

        // Without the key file's key, nothing opens: a clear error, not garbage.
        let other = try SecretKey32(bytes: Array(repeating: 1, count: 32))
        #expect(throws: SealedSecretError.self) { try SQLiteSyncServerStore(path: store.database.path, sealingKey: other).load() }
    }

    @Test("a database written in plain text by an older build is hashed and sealed on its first load, and still works")
    func upgrade() throws {
        var plain = try ServerHarness(sqlite: true)
        let acme = try plain.tenant("acme")
        _ = try plain.send("POST", "/credentials", ["id": "c", "name": "C", "kind": "api_key", "value": "sk_PLAIN"], key: acme)
        let path = try #require(plain.store).database.path
        // What an older build wrote: the tenant's key itself in the key column.
        try plain.store?.database.run("UPDATE tenants SET api_key = ? WHERE tenant_id = 'acme'", [.text(acme)])
        #expect(try Self.everyCell(plain.store!).contains { $0.contains("sk_PLAIN") })

        let upgraded = try SQLiteSyncServerStore(path: path, sealingKey: Self.sealingKey)
        let state = try upgraded.load()
        #expect(state.tenant(forKey: acme) == "acme", "the old plain key still signs in")
        let cells = try Self.everyCell(upgraded)
        #expect(!cells.contains { $0.contains("sk_PLAIN") || $0 == acme || $0 == plain.root })
        #expect(try SQLiteSyncServerStore(path: path, sealingKey: Self.sealingKey).load() == state)
    }
}
