import Testing
import ChatCrypto
import LabCrypto
import LabKernel
@testable import SecureChatServer

/// The authorisation holes a hostile user would try first, each from the other side.
@Suite("Chat server: who may do what")
struct AccessControlTests {
    @Test("a private group is joined only by invitation (used once) or by being added; a public one by anyone")
    func privateGroups() {
        var h = ChatHarness()
        let alice = h.register("alice"), eve = h.register("eve"), bob = h.register("bob")
        let group = h.send("POST", "/channels", ["name": "secret"], token: alice.access).jsonBody
        #expect(group?["visibility"] == "private" && group?["legacy_plaintext"] == false)
        let id = group?["id"]?.stringValue ?? ""
        let before = h.fingerprint
        #expect(h.send("POST", "/channels/\(id)/join", token: eve.access).status == 403)
        #expect(h.send("GET", "/channels/\(id)/messages", token: eve.access).status == 403)
        #expect(h.send("POST", "/channels/\(id)/invites", ["user_id": .string(eve.userID)], token: eve.access).status == 403, "only members invite")
        #expect(h.fingerprint == before)

        let bobSocket = h.socket(bob)!
        let invite = h.send("POST", "/channels/\(id)/invites", ["user_id": .string(bob.userID)], token: alice.access)
        #expect(invite.status == 201 && invite.jsonBody?["user_id"] == .string(bob.userID))
        #expect(h.events(bobSocket, "channel.invite").first?["channel"]?["id"] == .string(id))
        #expect(h.send("GET", "/channels/invites", token: bob.access).jsonBody?.arrayValue?.first?["channel"]?["id"] == .string(id))
        #expect(h.send("POST", "/channels/\(id)/join", token: eve.access).status == 403, "bob's invitation is not eve's")
        #expect(h.send("POST", "/channels/\(id)/join", token: bob.access).status == 204)
        #expect(h.send("GET", "/channels/\(id)/messages", token: bob.access).status == 200)
        #expect(h.send("GET", "/channels/invites", token: bob.access).jsonBody?.arrayValue?.isEmpty == true, "used up")

        let open = h.send("POST", "/channels", ["name": "lobby", "visibility": "public"], token: alice.access).jsonBody?["id"]?.stringValue ?? ""
        #expect(h.send("POST", "/channels/\(open)/join", token: eve.access).status == 204)
        // An invitation expires.
        let late = h.send("POST", "/channels", ["name": "later"], token: alice.access).jsonBody?["id"]?.stringValue ?? ""
        h.send("POST", "/channels/\(late)/invites", ["user_id": .string(eve.userID)], token: alice.access)
        h.now = h.now + .days(8)
        let (_, eveLater) = h.login("eve")
        #expect(h.send("POST", "/channels/\(late)/join", token: eveLater?.access).status == 403)
    }

    @Test("the admin moderates (metadata, members, removal, deletion) but cannot read or post into others' conversations")
    func adminCannotRead() {
        var h = ChatHarness()
        let admin = h.register("root"), alice = h.register("alice"), bob = h.register("bob")
        let dm = h.send("POST", "/channels/dm", ["user_id": .string(bob.userID)], token: alice.access).jsonBody?["id"]?.stringValue ?? ""
        let group = h.send("POST", "/channels", ["name": "team"], token: alice.access).jsonBody?["id"]?.stringValue ?? ""
        h.send("POST", "/channels/\(group)/members", ["user_id": .string(bob.userID)], token: alice.access)
        let before = h.fingerprint
        for channel in [dm, group] {
            #expect(h.send("GET", "/channels/\(channel)/messages", token: admin.access).status == 403)
            #expect(h.send("POST", "/channels/\(channel)/messages", ["content": .string(ChannelMessageTests.groupCiphertext)], token: admin.access).status == 403)
            #expect(h.send("GET", "/keys/channels/\(channel)/sender-keys", token: admin.access).status == 403)
            #expect(h.send("GET", "/channels/\(channel)", token: admin.access).status == 200, "metadata is for moderation")
            #expect(h.send("GET", "/channels/\(channel)/members", token: admin.access).status == 200)
        }
        #expect(h.fingerprint == before)
        let bobSocket = h.socket(bob)!
        #expect(h.send("DELETE", "/channels/\(group)/members/\(bob.userID)", token: admin.access).status == 204)
        #expect(h.events(bobSocket, "channel.member_left").first?["user_id"] == .string(bob.userID))
        #expect(h.send("GET", "/channels/\(group)/messages", token: bob.access).status == 403)
        #expect(h.send("DELETE", "/channels/\(dm)", token: admin.access).status == 204)
        #expect(h.server.state.audit.map(\.action).suffix(2) == ["channel.remove_member", "channel.delete"])
    }

    @Test("reuse of a rotated refresh token revokes that login everywhere and closes its sockets; the user's other logins stay")
    func reuseClosesSockets() {
        var h = ChatHarness()
        let alice = h.register("alice")
        let (_, tablet) = h.login("alice", device: "tablet")
        let phoneSocket = h.socket(alice)!, tabletSocket = h.socket(tablet!)!
        let rotated = h.send("POST", "/auth/refresh", ["refresh_token": .string(alice.refresh)])
        #expect(rotated.status == 200)
        let second = h.socket(ChatHarness.Account(userID: alice.userID, deviceID: alice.deviceID,
                                                   access: rotated.jsonBody?["access_token"]?.stringValue ?? "", refresh: "", username: "alice"))!
        // A thief replays the old token.
        #expect(h.send("POST", "/auth/refresh", ["refresh_token": .string(alice.refresh)]).status == 401)
        #expect(h.closed[phoneSocket] == 4003 && h.closed[second] == 4003, "every socket of that login is closed")
        #expect(h.closed[tabletSocket] == nil, "the tablet's own login is untouched")
        #expect(h.server.state.connections[tabletSocket] != nil)
    }

    @Test("nobody can drain another user's one-time keys: bundle fetches are limited per requester and target")
    func bundleDrain() throws {
        var h = ChatHarness()
        let alice = h.register("alice"), bob = h.register("bob"), eve = h.register("eve")
        let identity = try IdentityKey(seed: SHA256.hash("bob id")), spk = try PreKey(id: 1, seed: SHA256.hash("bob spk"))
        let bundle = PreKeyBundle(identity: identity, signedPreKey: spk, oneTimePreKey: nil)
        let keys = (0..<40).map { JSONValue.string(Base64.encode(SHA256.hash("otk \($0)"))) }
        #expect(h.send("POST", "/keys/upload", ["device_id": .string(bob.deviceID), "identity_key": .string(Base64.encode(identity.publicKey)),
                                                "signed_pre_key": .string(Base64.encode(spk.publicKey)),
                                                "signed_pre_key_signature": .string(Base64.encode(bundle.signedPreKeySignature)),
                                                "one_time_pre_keys": .array(keys)], token: bob.access).status == 201)
        let statuses = (0..<15).map { _ in h.send("GET", "/keys/\(bob.userID)/bundles", token: eve.access).status }
        #expect(statuses.prefix(10).allSatisfy { $0 == 200 } && statuses.suffix(5).allSatisfy { $0 == 429 })
        #expect(h.send("GET", "/keys/\(bob.deviceID)/bundle", token: eve.access).status == 429, "the per-device route counts too")
        #expect(h.server.state.bundles[bob.deviceID]?.oneTimeKeys.count == 30)
        #expect(h.send("GET", "/keys/\(bob.userID)/bundles", token: alice.access).status == 200, "another requester is not blocked")
        h.now = h.now + .seconds(6)
        #expect(h.send("GET", "/keys/\(bob.userID)/bundles", token: eve.access).status == 200, "the bucket refills")
    }

    @Test("a login for an unknown username does the same Argon2id work as for a known one")
    func loginTiming() {
        var h = ChatHarness { $0.passwordCost = PasswordHash.Cost(opsLimit: 2, memLimit: 1 << 20) }
        _ = h.register("alice")
        func work(_ username: String) -> (ops: String, mem: String)? {
            let request = HTTPRequestMessage(method: "POST", target: "/api/v1/auth/login", headers: ["content-type": "application/json"],
                                             body: Array(#"{"username":"\#(username)","password":"wrong password"}"#.utf8))
            guard case .password(let job) = h.server.begin(request, now: h.now), case .verify(_, let encoded) = job.work else { return nil }
            let parts = encoded.split(separator: "$")
            #expect(job.run() == .verified(false))
            return (String(parts[1]), String(parts[2]))
        }
        let known = work("alice"), unknown = work("nobody-here")
        #expect(known != nil && known?.ops == unknown?.ops && known?.mem == unknown?.mem && known?.ops == "2" && known?.mem == "1048576")
    }

    @Test("failed logins are limited per account whatever the address; the real owner then waits too, but others do not")
    func failedLoginsPerAccount() {
        var h = ChatHarness()
        _ = h.register("alice")
        _ = h.register("bob")
        for attempt in 0..<10 {
            let peer = "10.0.0.\(attempt)"
            let r = h.server.handle(HTTPRequestMessage(method: "POST", target: "/api/v1/auth/login", headers: ["content-type": "application/json"],
                                                       body: Array(#"{"username":"alice","password":"guess \#(attempt)"}"#.utf8), peer: peer), now: h.now)
            #expect(r.response.status == 401)
        }
        #expect(h.login("alice").0.status == 429)
        #expect(h.login("bob").0.status == 200)
    }

    @Test("access tokens are stored by their hash; a copy of the state holds no bearer token")
    func hashedAccessTokens() {
        var h = ChatHarness()
        let alice = h.register("alice")
        #expect(h.server.state.accessTokens[alice.access] == nil)
        #expect(h.server.state.accessTokens[ChatServer.tokenKey(alice.access)]?.userID == alice.userID)
        #expect(h.send("GET", "/users/me", token: alice.access).status == 200)
    }

    @Test("ciphertext only by default: plaintext is refused unless the server allows legacy channels and the creator asked")
    func ciphertextDefault() {
        var strict = ChatHarness { $0.allowLegacyPlaintext = false }
        let alice = strict.register("alice")
        let group = strict.send("POST", "/channels", ["name": "g"], token: alice.access).jsonBody?["id"]?.stringValue ?? ""
        let plain = strict.send("POST", "/channels/\(group)/messages", ["content": "hello"], token: alice.access)
        #expect(plain.status == 422 && plain.detail.contains("end-to-end encrypted"))
        let refused = strict.send("POST", "/channels", ["name": "old", "legacy_plaintext": true], token: alice.access)
        #expect(refused.status == 422 && refused.detailLoc == ["body", "legacy_plaintext"])
        var legacy = ChatHarness()
        let bob = legacy.register("bob")
        let old = legacy.send("POST", "/channels", ["name": "old", "legacy_plaintext": true], token: bob.access).jsonBody
        #expect(old?["legacy_plaintext"] == true)
        #expect(legacy.send("POST", "/channels/\(old?["id"]?.stringValue ?? "")/messages", ["content": "hello"], token: bob.access).jsonBody?["protocol_version"] == 1)
    }
}
