import Testing
import LabKernel
import ServerStorage
@testable import SecureChatServer

@Suite("Chat server: history set aside into an archive")
struct HistorySetAsideTests {
    /// The same requests against a server that keeps its history in memory and one that
    /// sets it aside in a SQLite archive (each channel's older messages, rotated and revoked
    /// refresh tokens): every answer must be the same, byte for byte.
    struct Pair {
        var plain = ChatHarness()
        var archived = ChatHarness()
        let archive: SQLiteChatArchive
        var answers = 0

        init(kept: Int) throws {
            archive = try SQLiteChatArchive()
            archived.server.state.messages.setAside(into: archive, keepingPerChannel: kept)
            archived.server.state.refreshTokens.setAside(into: archive)
        }

        /// Sends to both; expects the same status and body; returns the answer.
        @discardableResult
        mutating func send(_ method: String, _ target: String, _ body: JSONValue? = nil, token: String? = nil,
                           sourceLocation: SourceLocation = #_sourceLocation) -> HTTPResponseMessage {
            let a = plain.send(method, target, body, token: token), b = archived.send(method, target, body, token: token)
            #expect(a.status == b.status && a.body == b.body, "\(method) \(target): \(String(decoding: a.body, as: UTF8.self)) against \(String(decoding: b.body, as: UTF8.self))",
                    sourceLocation: sourceLocation)
            answers += 1
            return a
        }

        mutating func advance(_ span: TimeSpan) {
            plain.now = plain.now + span
            archived.now = archived.now + span
        }

        mutating func register(_ name: String) -> ChatHarness.Account {
            let account = plain.register(name)
            _ = archived.register(name)
            return account
        }

        mutating func login(_ name: String) -> ChatHarness.Account {
            let account = plain.login(name).1!
            _ = archived.login(name)
            return account
        }

        /// Refreshes on both; the new pair (nil: refused).
        mutating func refresh(_ token: String, sourceLocation: SourceLocation = #_sourceLocation) -> (access: String, refresh: String)? {
            let answer = send("POST", "/auth/refresh", ["refresh_token": .string(token)], sourceLocation: sourceLocation)
            guard answer.status == 200, let body = answer.jsonBody else { return nil }
            return (body["access_token"]?.stringValue ?? "", body["refresh_token"]?.stringValue ?? "")
        }
    }

    @Test("pages, retried sends, edits, deletes, replies and counts answer the same whether older messages are in memory or set aside")
    func sameAnswers() throws {
        var pair = try Pair(kept: 1)
        let alice = pair.register("alice")
        let group = pair.plain.legacyGroup(alice, "g")
        #expect(pair.archived.legacyGroup(alice, "g") == group, "both servers draw the same ids")
        let other = pair.plain.legacyGroup(alice, "h")
        _ = pair.archived.legacyGroup(alice, "h")
        var ids: [String] = [], created: [String] = []
        for n in 0..<6 {
            pair.advance(.seconds(1))
            let sent = pair.send("POST", "/channels/\(group)/messages", ["content": .string("m\(n)"), "client_message_id": .string("c\(n)")],
                                 token: alice.access)
            ids.append(sent.jsonBody?["id"]?.stringValue ?? "")
            created.append(sent.jsonBody?["created_at"]?.stringValue ?? "")
            pair.send("POST", "/channels/\(other)/messages", ["content": .string("other \(n)")], token: alice.access)
        }
        #expect(pair.archive.messageCount == 10 && pair.archived.server.state.messages.rows.count == 2, "one message of each channel is in memory")
        #expect(pair.archived.server.state.channels[group]?.messageIDs == [ids[5]])

        // A retried send of a message set aside finds it; no new message.
        let retried = pair.send("POST", "/channels/\(group)/messages", ["content": "m0", "client_message_id": "c0"], token: alice.access)
        #expect(retried.status == 200 && retried.jsonBody?["id"]?.stringValue == ids[0])
        // Pages from the newest, across the boundary, and before a message set aside.
        for query in ["", "?limit=1", "?limit=2", "?limit=6", "?limit=5", "?before=\(created[5])&limit=2", "?before=\(created[3])&limit=2",
                      "?before=\(created[1])", "?before=\(created[0])", "?before=2099-01-01T00:00:00.000Z&limit=3"] {
            pair.send("GET", "/channels/\(group)/messages\(query)", token: alice.access)
        }
        // Edits and deletes of messages set aside, then the pages that show them.
        pair.advance(.seconds(1))
        pair.send("PATCH", "/channels/messages/\(ids[1])", ["content": "m1 again"], token: alice.access)
        pair.send("DELETE", "/channels/messages/\(ids[2])", token: alice.access)
        pair.send("DELETE", "/channels/messages/\(ids[2])", token: alice.access)
        let page = pair.send("GET", "/channels/\(group)/messages?limit=4", token: alice.access)
        #expect(page.jsonBody?["messages"]?.arrayValue?.compactMap { $0["content"]?.stringValue } == ["m0", "m1 again", "m3", "m4", "m5"].suffix(4).map { $0 })
        #expect(page.jsonBody?["has_more"] == true)
        // A reply to a message set aside carries its preview.
        pair.advance(.seconds(1))
        let reply = pair.send("POST", "/channels/\(group)/messages", ["content": "re", "reply_to_id": .string(ids[0])], token: alice.access)
        #expect(reply.jsonBody?["reply_to"]?["content"]?.stringValue == "m0")
        pair.send("GET", "/admin/channels", token: alice.access)
        let stats = pair.send("GET", "/admin/stats", token: alice.access)
        #expect(stats.jsonBody?["messages"]?.numberValue == 12, "six and a reply in one channel, less the deleted one; six in the other")
        // Deleting a channel takes its messages set aside with it, and no other channel's.
        pair.send("DELETE", "/channels/\(group)", token: alice.access)
        pair.send("GET", "/admin/stats", token: alice.access)
        pair.send("GET", "/channels/\(other)/messages?limit=100", token: alice.access)
        #expect(pair.archive.messageCount == 5 && pair.archive.failure == nil)
        #expect(pair.plain.server.state.messages.values.map(\.id).sorted() == pair.archived.server.state.messages.values.map(\.id).sorted())
        #expect(pair.answers == 33)
    }

    @Test("rotation, a lost answer's retry, reuse, logouts, a ban, a deleted device and expiry answer the same whether spent refresh tokens are in memory or set aside")
    func sameTokenAnswers() throws {
        var pair = try Pair(kept: 1)
        let alice = pair.register("alice"), bob = pair.register("bob")
        // A rotation, then the old token again within the grace while the new pair is
        // unused: the answer was lost, so a fresh pair.
        let first = pair.refresh(bob.refresh)
        let second = try #require(first)
        pair.advance(.seconds(30))
        let retried = pair.refresh(bob.refresh)
        let third = try #require(retried, "a lost answer's retry")
        var refused = pair.refresh(second.refresh) == nil
        #expect(refused, "the pair the retry replaced is revoked")
        // Rotated, then presented again after the grace: reuse revokes the whole family.
        let rotatedThird = pair.refresh(third.refresh)
        let fourth = try #require(rotatedThird)
        pair.advance(.minutes(4))
        refused = pair.refresh(third.refresh) == nil && pair.refresh(fourth.refresh) == nil
        #expect(refused, "reuse revoked the family")
        pair.send("GET", "/users/me", token: fourth.access)
        // A new login: its pair used (confirmed), then its rotated token again within the grace.
        let login = pair.login("bob")
        let rotatedLogin = pair.refresh(login.refresh)
        let next = try #require(rotatedLogin)
        pair.send("GET", "/users/me", token: next.access)
        refused = pair.refresh(login.refresh) == nil
        #expect(refused, "the new pair was used: reuse, not a retry")
        // Logout, logout everywhere, a ban, a deleted device.
        let phone = pair.login("bob")
        pair.send("POST", "/auth/logout", ["refresh_token": .string(phone.refresh)])
        refused = pair.refresh(phone.refresh) == nil
        #expect(refused, "logged out")
        let laptop = pair.login("bob"), tablet = pair.login("bob")
        let rotatedLaptop = pair.refresh(laptop.refresh)
        let rotated = try #require(rotatedLaptop)
        pair.send("DELETE", "/devices/\(tablet.deviceID)", token: rotated.access)
        refused = pair.refresh(tablet.refresh) == nil
        #expect(refused, "the device was deleted")
        pair.send("POST", "/auth/logout-all", token: rotated.access)
        refused = pair.refresh(rotated.refresh) == nil && pair.refresh(laptop.refresh) == nil
        #expect(refused, "logged out everywhere: the tokens set aside are revoked too")
        let again = pair.login("bob")
        pair.send("POST", "/admin/users/\(bob.userID)/ban", token: alice.access)
        refused = pair.refresh(again.refresh) == nil
        #expect(refused, "banned")
        #expect(pair.archive.tokenCount > 8 && pair.archived.server.state.refreshTokens.rows.count < 3, "the spent tokens are in the archive")
        // A month later the sweep forgets them all, in memory and set aside alike.
        pair.advance(.days(31))
        refused = pair.refresh(alice.refresh) == nil
        #expect(refused, "alice's token expired")
        #expect(pair.archive.tokenCount == 0 && pair.archive.failure == nil)
        #expect(pair.plain.server.state.refreshTokens.count == pair.archived.server.state.refreshTokens.count)
    }
}
