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
        #expect(try h.uploadKeys(bob, "bob", oneTime: 40).status == 201)
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

@Suite("Chat server: finding people, moderation listings, device sets")
struct DirectoryTests {
    @Test("a user is found by username (any case) to open a DM; the profile shows no email or role")
    func byUsername() {
        var h = ChatHarness()
        let alice = h.register("alice"), bob = h.send("POST", "/auth/register", ["username": "Bob_2", "password": "long enough", "email": "b@x.y"]).jsonBody
        let found = h.send("GET", "/users/by-username/bob_2", token: alice.access)
        #expect(found.status == 200 && found.jsonBody?["id"] == bob?["user_id"] && found.jsonBody?["email"] == nil && found.jsonBody?["role"] == nil)
        #expect(h.send("GET", "/users/by-username/nobody", token: alice.access).status == 404)
        #expect(h.send("GET", "/users/by-username/bob_2").status == 401)
        let dm = h.send("POST", "/channels/dm", ["user_id": found.jsonBody?["id"] ?? .null], token: alice.access)
        #expect(dm.status == 201)
    }

    @Test("admin listings page and search users and channels; the audit log filters by actor, action and time; none of it for members")
    func adminListings() {
        var h = ChatHarness()
        let admin = h.register("admin")
        var accounts: [ChatHarness.Account] = []
        for n in 0..<12 { accounts.append(h.register(n < 10 ? "user0\(n)" : "user\(n)")) }
        for n in 0..<5 { h.send("POST", "/channels", ["name": .string("team-\(n)")], token: accounts[n].access) }
        let page = h.send("GET", "/admin/users?q=USER&limit=5&offset=5", token: admin.access).jsonBody
        #expect(page?["total"] == 12 && page?["items"]?.arrayValue?.map { $0["username"]?.stringValue ?? "" } == (5..<10).map { "user0\($0)" })
        #expect(page?["items"]?.arrayValue?.first?["devices"] == 1 && page?["items"]?.arrayValue?.first?["standing"] == "active")
        let channels = h.send("GET", "/admin/channels?q=team-3", token: admin.access).jsonBody
        #expect(channels?["total"] == 1 && channels?["items"]?.arrayValue?.first?["member_count"] == 1)
        h.now = h.now + .minutes(1)
        let cut = h.server.wallClock.rfc3339(at: h.now)
        h.send("POST", "/admin/users/\(accounts[0].userID)/suspend", ["minutes": 5], token: admin.access)
        h.send("POST", "/admin/users/\(accounts[1].userID)/ban", token: admin.access)
        h.send("PATCH", "/admin/settings", ["registration_open": true], token: admin.access)
        let users = h.send("GET", "/admin/audit-log?action=user.&since=\(PercentEncoding.encode(cut))", token: admin.access)
        #expect(users.jsonBody?.arrayValue?.map { $0["action"]?.stringValue ?? "" } == ["user.ban", "user.suspend"] && users.header("X-Total-Count") == "2")
        #expect(h.send("GET", "/admin/audit-log?actor=\(accounts[3].userID)", token: admin.access).jsonBody?.arrayValue?.isEmpty == true)
        #expect(h.send("GET", "/admin/audit-log?until=\(PercentEncoding.encode(cut))", token: admin.access).jsonBody?.arrayValue?.isEmpty == true)
        #expect(h.send("GET", "/admin/audit-log?since=yesterday", token: admin.access).status == 422)
        #expect(h.send("GET", "/admin/users?limit=0", token: admin.access).status == 422)
        for path in ["/admin/users", "/admin/channels", "/admin/audit-log"] {
            #expect(h.send("GET", path, token: accounts[4].access).status == 403, "\(path) is for admins")
        }
    }

    @Test("the device set has a version: uploading keys and deleting a device bump it and tell everyone who shares a channel")
    func deviceSets() throws {
        var h = ChatHarness()
        let alice = h.register("alice"), bob = h.register("bob"), stranger = h.register("stranger")
        h.send("POST", "/channels/dm", ["user_id": .string(bob.userID)], token: alice.access)
        let (aliceSocket, strangerSocket) = (h.socket(alice)!, h.socket(stranger)!)
        #expect(try h.uploadKeys(bob, "bob phone").status == 201)
        let (_, tablet) = h.login("bob", device: "tablet")
        #expect(try h.uploadKeys(tablet!, "bob tablet").status == 201)
        var listing = h.send("GET", "/users/\(bob.userID)/devices", token: alice.access).jsonBody
        #expect(listing?["version"] == 2 && listing?["devices"]?.arrayValue?.count == 2)
        #expect(h.events(aliceSocket, "devices.changed").map { $0["version"] } == [1, 2])
        #expect(h.events(strangerSocket, "devices.changed").isEmpty, "only people who share a channel hear it")
        #expect(try h.uploadKeys(tablet!, "bob tablet").status == 201 && h.events(aliceSocket, "devices.changed").count == 2, "same keys: no change")
        let tabletSocket = h.socket(tablet!)!
        #expect(h.send("DELETE", "/devices/\(tablet!.deviceID)", token: bob.access).status == 204)
        #expect(h.closed[tabletSocket] == 4003 && h.send("GET", "/users/me", token: tablet!.access).status == 401)
        listing = h.send("GET", "/users/\(bob.userID)/devices", token: alice.access).jsonBody
        #expect(listing?["version"] == 3 && listing?["devices"]?.arrayValue?.compactMap { $0["device_id"]?.stringValue } == [bob.deviceID])
        #expect(h.events(aliceSocket, "devices.changed").last?["version"] == 3)
        #expect(h.send("GET", "/keys/\(bob.userID)/bundles", token: alice.access).jsonBody?.arrayValue?.first?["device_set_version"] == 3)
    }
}
