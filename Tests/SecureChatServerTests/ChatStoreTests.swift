import Foundation
import Testing
import LabCrypto
import LabKernel
import LabTestSupport
@testable import SecureChatServer
import ServerStorage

@Suite("Chat server: SQLite store")
struct ChatStoreTests {
    @Test("every changed row reaches SQLite: the loaded state equals the live one, indexes rebuilt, deletes included")
    func roundTrip() throws {
        var h = ChatHarness()
        let store = try SQLiteChatServerStore(path: TestPaths.scratchDirectory("chat-store").appendingPathComponent("chat.sqlite").path)
        func step(_ body: (inout ChatHarness) -> Void) throws {
            body(&h)
            try store.apply(h.takeChanges())
        }
        var alice = ChatHarness.Account(userID: "", deviceID: "", access: "", refresh: "", username: "")
        var bob = alice
        try step { alice = $0.register("alice") }
        try step { bob = $0.register("bob") }
        var dm = ""
        try step { dm = $0.send("POST", "/channels/dm", ["user_id": .string(bob.userID)], token: alice.access).jsonBody?["id"]?.stringValue ?? "" }
        var group = ""
        try step { group = $0.legacyGroup(alice) }
        var ids: [String] = []
        for (n, channel) in [dm, group, group].enumerated() {
            try step { ids.append($0.send("POST", "/channels/\(channel)/messages", ["content": .string("m\(n)"), "client_message_id": .string("c\(n)")],
                                          token: alice.access).jsonBody?["id"]?.stringValue ?? "") }
        }
        try step { $0.send("DELETE", "/channels/messages/\(ids[1])", token: alice.access) }
        // Bob's keys: three one-time keys, one of them handed out (the same text as uploaded).
        try step { _ = try? $0.uploadKeys(bob, "bob", oneTime: 3) }
        var handed: String?
        try step { handed = $0.send("GET", "/keys/\(bob.deviceID)/bundle", token: alice.access).jsonBody?["one_time_pre_key"]?.stringValue }
        #expect(handed == Base64.encode(SHA256.hash("bob otk 0")))
        try step { $0.send("POST", "/auth/logout", ["refresh_token": .string(bob.refresh)]) }
        try step { $0.send("PATCH", "/admin/settings", ["registration_open": false], token: alice.access) }
        let loaded = try store.load()
        let live = h.server.state
        #expect(loaded.users.rows == live.users.rows && loaded.devices.rows == live.devices.rows)
        #expect(loaded.refreshTokens.rows == live.refreshTokens.rows && loaded.accessTokens.rows == live.accessTokens.rows)
        #expect(loaded.channels.rows == live.channels.rows, "message order is rebuilt from the messages")
        #expect(loaded.members.rows == live.members.rows && loaded.messages.rows == live.messages.rows)
        #expect(live.messages.count == 2 && live.messageByClientID.count == 2, "the DM's plaintext was refused, the group's two stored")
        #expect(loaded.messageByClientID == live.messageByClientID && loaded.settings == live.settings)
        #expect(loaded.userIDByName == live.userIDByName && loaded.channelsOfUser == live.channelsOfUser && loaded.dmByPair == live.dmByPair)
        #expect(loaded.audit == live.audit && loaded.audit.count == 1)
        #expect(loaded.bundles.rows == live.bundles.rows && live.bundles[bob.deviceID]?.oneTimeKeys.count == 2, "the key bundle and its two keys left")
    }
}
