import Testing
import LabCrypto
import LabKernel
@testable import SecureChatServer

@Suite("Chat server: accounts, tokens, tickets, moderation")
struct AuthTests {
    @Test("register answers d3chat's TokenResponse; a name is taken once; login makes a new device; bad passwords are 401")
    func register() {
        var h = ChatHarness()
        let r = h.send("POST", "/auth/register", ["username": "alice", "password": "correct horse", "device_name": "phone"])
        #expect(r.status == 201)
        #expect(Set(r.jsonBody?.objectValue?.keys ?? [:].keys) == ["access_token", "refresh_token", "token_type", "user_id", "device_id", "expires_in"])
        #expect(r.jsonBody?["token_type"] == "bearer")
        #expect(h.send("POST", "/auth/register", ["username": "Alice", "password": "another one"]).detail == "Username already taken")
        let (login, second) = h.login("alice")
        #expect(login.status == 200 && second?.deviceID != r.jsonBody?["device_id"]?.stringValue)
        #expect(h.send("GET", "/devices", token: second?.access).jsonBody?.arrayValue?.count == 2)
        #expect(h.login("alice", password: "wrong horse").0.status == 401)
        #expect(h.login("nobody").0.detail == "Invalid credentials")
        let hash = h.server.state.users.values.first!.passwordHash
        #expect(hash.hasPrefix("argon2id$") && !hash.contains("correct"))
        #expect(h.send("GET", "/users/me", token: second?.access).jsonBody?["username"] == "alice")
    }

    @Test("refresh rotates; presenting a rotated token again revokes the whole family; logout revokes", arguments: [false, true])
    func refreshRotation(logout: Bool) {
        var h = ChatHarness()
        let a = h.register("alice")
        let first = h.send("POST", "/auth/refresh", ["refresh_token": .string(a.refresh)])
        #expect(first.status == 200)
        let next = h.account(first, "alice")
        #expect(next.refresh != a.refresh && next.deviceID == a.deviceID)
        #expect(h.send("GET", "/users/me", token: a.access).status == 401, "the old access token went with the rotation")
        #expect(h.send("GET", "/users/me", token: next.access).status == 200)
        if logout {
            #expect(h.send("POST", "/auth/logout", ["refresh_token": .string(next.refresh)]).status == 204)
        } else {
            let reuse = h.send("POST", "/auth/refresh", ["refresh_token": .string(a.refresh)])
            #expect(reuse.status == 401 && reuse.detail.contains("reuse detected"))
            #expect(h.server.state.audit.last?.action == "refresh_token_reuse")
        }
        #expect(h.send("GET", "/users/me", token: next.access).status == 401)
        #expect(h.send("POST", "/auth/refresh", ["refresh_token": .string(next.refresh)]).status == 401)
    }

    @Test("a refresh whose answer was lost may be retried with the same token for a while; after use or after the grace, it is reuse")
    func lostRefreshAnswer() {
        var h = ChatHarness()
        let a = h.register("alice")
        let socket = h.socket(a)!
        let lost = h.account(h.send("POST", "/auth/refresh", ["refresh_token": .string(a.refresh)]), "alice")  // never reaches the client
        h.now = h.now + .seconds(40)
        let retried = h.send("POST", "/auth/refresh", ["refresh_token": .string(a.refresh)])
        #expect(retried.status == 200 && h.closed[socket] == nil, "a retry, not an attack: the login and its socket live on")
        let current = h.account(retried, "alice")
        #expect(h.send("GET", "/users/me", token: current.access).status == 200)
        #expect(h.send("POST", "/auth/refresh", ["refresh_token": .string(lost.refresh)]).status == 401, "the pair that got lost is dead")
        // The new pair was used: the old token again is reuse, and ends the login.
        let reuse = h.send("POST", "/auth/refresh", ["refresh_token": .string(a.refresh)])
        #expect(reuse.status == 401 && h.closed[socket] == 4003 && h.send("GET", "/users/me", token: current.access).status == 401)
        // Past the grace, even an unused successor does not save a replayed token.
        var late = ChatHarness()
        let b = late.register("bob")
        late.send("POST", "/auth/refresh", ["refresh_token": .string(b.refresh)])
        late.now = late.now + .minutes(4)
        #expect(late.send("POST", "/auth/refresh", ["refresh_token": .string(b.refresh)]).detail.contains("reuse detected"))
    }

    @Test("access tokens expire after 15 minutes; tickets work once within 30 s; a bad ticket is 4001")
    func lifetimes() {
        var h = ChatHarness()
        let a = h.register("alice")
        let ticket = h.send("POST", "/auth/ws-ticket", token: a.access).jsonBody?["ticket"]?.stringValue ?? ""
        #expect(h.server.connect(ticket: "nope", now: h.now) == .refused(code: 4001, reason: "Invalid or expired ticket"))
        guard case .accepted = h.server.connect(ticket: ticket, now: h.now) else { Issue.record("ticket refused"); return }
        #expect(h.server.connect(ticket: ticket, now: h.now) == .refused(code: 4001, reason: "Invalid or expired ticket"), "single use")
        let late = h.send("POST", "/auth/ws-ticket", token: a.access).jsonBody?["ticket"]?.stringValue ?? ""
        #expect(h.server.connect(ticket: late, now: h.now + .seconds(31)) == .refused(code: 4001, reason: "Invalid or expired ticket"))
        h.now = h.now + .minutes(15)
        let expired = h.send("GET", "/users/me", token: a.access)
        #expect(expired.status == 401 && expired.detail == "Token expired" && expired.header("WWW-Authenticate") == "Bearer")
        #expect(h.send("GET", "/users/me").detail == "Not authenticated")
    }

    @Test("the hourly sweep forgets expired credentials (and deletes their rows); an answer to one does not change")
    func expiredCredentialsForgotten() {
        var h = ChatHarness()
        var alice = h.register("alice")
        let firstRefresh = alice.refresh
        for _ in 0..<3 { alice = h.account(h.send("POST", "/auth/refresh", ["refresh_token": .string(alice.refresh)]), "alice") }
        let bob = h.register("bob")  // a login whose access token is never presented again
        _ = h.send("POST", "/auth/ws-ticket", token: bob.access)  // a ticket never used
        #expect(h.server.state.refreshTokens.count == 5 && h.server.state.accessTokens.count == 2 && h.server.state.tickets.count == 1)
        _ = h.takeChanges()

        // Within a day of its expiry an access token is still told apart from an unknown one.
        h.now = h.now + .hours(20)
        #expect(h.send("GET", "/users/me", token: alice.access).detail == "Token expired")
        #expect(h.server.state.accessTokens.count == 1 && h.server.state.tickets.isEmpty, "the ticket went with the sweep")
        // A day after, the one never presented is gone too, its row deleted; the answer is a 401 as before.
        h.now = h.now + .hours(5)
        #expect(h.send("GET", "/users/me", token: bob.access).status == 401)
        #expect(h.server.state.accessTokens.isEmpty)
        #expect(h.takeChanges().contains { if case .accessToken(_, nil) = $0 { return true }; return false })

        // Rotated and current refresh tokens stay their 30 days (reuse is detected all along) …
        #expect(h.server.state.refreshTokens.count == 5)
        h.now = h.now + .days(30)
        // … and are then forgotten, refused as before.
        let late = h.send("POST", "/auth/refresh", ["refresh_token": .string(firstRefresh)])
        #expect(late.status == 401 && late.detail == "Invalid refresh token")
        #expect(h.server.state.refreshTokens.isEmpty)
        #expect(h.takeChanges().filter { if case .refreshToken(_, nil) = $0 { return true }; return false }.count == 5)
        #expect(h.send("POST", "/auth/refresh", ["refresh_token": .string(bob.refresh)]).detail == "Invalid refresh token")
    }

    @Test("a ban revokes tokens and closes sockets at once and refuses the next login; a suspension ends; admins only")
    func moderation() {
        var h = ChatHarness()
        let admin = h.register("root")
        let bob = h.register("bob")
        let socket = h.socket(bob)!
        #expect(h.send("POST", "/admin/users/\(admin.userID)/ban", token: bob.access).status == 403)
        #expect(h.send("POST", "/admin/users/\(bob.userID)/ban", token: admin.access).status == 200)
        #expect(h.closed[socket] == 4003)
        #expect(h.send("GET", "/users/me", token: bob.access).status == 401)
        #expect(h.login("bob").0.detail == "Account banned")
        #expect(h.send("POST", "/admin/users/\(bob.userID)/unban", token: admin.access).status == 200)
        #expect(h.login("bob").0.status == 200)
        #expect(h.send("POST", "/admin/users/\(bob.userID)/suspend", ["minutes": 10], token: admin.access).status == 200)
        #expect(h.login("bob").0.detail.hasPrefix("Account suspended until"))
        h.now = h.now + .minutes(11)
        #expect(h.login("bob").0.status == 200)
        let stats = h.send("GET", "/admin/stats", token: admin.access).jsonBody
        #expect(stats?["users"] == 2 && stats?["devices"] == 4, "refused logins make no device")
        let log = h.send("GET", "/admin/audit-log", token: admin.access).jsonBody?.arrayValue?.compactMap { $0["action"]?.stringValue }
        #expect(log == ["user.suspend", "user.unban", "user.ban"])
        #expect(h.send("PATCH", "/admin/settings", ["registration_open": false], token: admin.access).status == 200)
        #expect(h.send("POST", "/auth/register", ["username": "carol", "password": "long enough"]).detail == "Registration is closed")
    }

    @Test("too many requests are 429 with Retry-After, and pass again once the bucket refills")
    func rateLimit() {
        var h = ChatHarness { $0.requestsPerMinute = 5 }
        let a = h.register("alice")
        for _ in 0..<5 { #expect(h.send("GET", "/users/me", token: a.access).status == 200) }
        let limited = h.send("GET", "/users/me", token: a.access)
        #expect(limited.status == 429 && limited.detail == "Rate limit exceeded" && limited.header("Retry-After") == "12")
        h.now = h.now + .seconds(12)
        #expect(h.send("GET", "/users/me", token: a.access).status == 200)
    }
}
