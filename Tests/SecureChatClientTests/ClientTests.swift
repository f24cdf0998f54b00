import Testing
import ChatCrypto
import LabCrypto
import LabKernel
@testable import SecureChatClient
@testable import SecureChatServer

/// The seed's readiness checklist, each item with real client cores against the server core.
@Suite("Chat client against the server core")
struct ClientTests {
    @Test("fresh install, register, restart: the stored snapshot restores the session without a login, and old sessions still decrypt")
    func restart() {
        var (net, dm) = ChatNetwork.pair()
        #expect(net.clients["alice"]!.isConnected && net.clients["bob"]!.isConnected)
        net.run("alice", .send(channelID: dm, text: "before the restart"))
        let saved = try! net.clients["bob"]!.snapshot.encoded()
        net.goOffline("bob")
        net.clients["bob"] = ChatClient(snapshot: try! ChatClient.Snapshot(encoded: saved))  // a new process over the stored bytes
        #expect(throws: (any Error).self) { try ChatClient.Snapshot(encoded: Array(saved.prefix(100))) }
        net.offline.remove("bob")
        net.log["bob"] = []
        net.run("bob", .start)
        #expect(net.clients["bob"]!.isConnected && net.loggedOut["bob"] == nil)
        // The seed's startup order: restore, /users/me, ticket, socket, channels, the channel's messages.
        #expect(Array(net.log["bob"]!.prefix(5)) == ["GET /api/v1/users/me", "POST /api/v1/auth/ws-ticket", "socket", "GET /api/v1/channels",
                                                     "GET /api/v1/channels/\(dm)/messages"])
        net.run("alice", .send(channelID: dm, text: "after the restart"))
        net.run("bob", .send(channelID: dm, text: "and back"))
        #expect(net.texts("bob", dm) == ["before the restart", "after the restart", "and back"])
        #expect(net.texts("alice", dm) == ["before the restart", "after the restart", "and back"])
    }

    @Test("two devices of one user both receive channel.new, and both read the DM; first messages decrypt both ways")
    func dmBothWaysOnEveryDevice() {
        var net = ChatNetwork()
        net.register("alice", username: "alice")
        net.register("bob", username: "bob")
        net.login("bob-tablet", username: "bob")
        net.login("alice-laptop", username: "alice")
        net.run("alice", .openDM(userID: net.userID("bob")))
        let dm = net.channelsAdded["alice"]!.last!
        #expect(net.channelsAdded["bob"]?.contains(dm) == true && net.channelsAdded["bob-tablet"]?.contains(dm) == true)
        net.run("alice", .send(channelID: dm, text: "hi bob, from alice"))
        net.run("bob-tablet", .send(channelID: dm, text: "hi alice, from bob's tablet"))
        net.run("bob", .send(channelID: dm, text: "and from bob's phone"))
        let expected = ["hi bob, from alice", "hi alice, from bob's tablet", "and from bob's phone"]
        for device in ["alice", "alice-laptop", "bob", "bob-tablet"] { #expect(net.texts(device, dm) == expected, "\(device)") }
        for device in ["alice", "alice-laptop", "bob", "bob-tablet"] { #expect(net.clients[device]!.stats.decryptionFailures == 0) }
        // The server holds ciphertext only.
        let stored = net.server.state.messages.values.map(\.content).joined()
        for text in expected { #expect(!stored.contains(text)) }
    }

    @Test("a group keeps each sender's order across a member's disconnect and reconnect")
    func groupOrderAcrossReconnect() {
        var (net, group) = ChatNetwork.team(["bob", "carol"])
        net.run("alice", .send(channelID: group, text: "welcome"))
        net.run("bob", .send(channelID: group, text: "thanks"))
        net.goOffline("carol")
        for n in 1...5 { net.run("alice", .send(channelID: group, text: "alice \(n)")) }
        net.run("bob", .send(channelID: group, text: "bob while carol is away"))
        net.goOnline("carol")
        let expected = ["welcome", "thanks", "alice 1", "alice 2", "alice 3", "alice 4", "alice 5", "bob while carol is away"]
        for name in ["alice", "bob", "carol"] { #expect(net.texts(name, group) == expected, "\(name)") }
        #expect(net.clients["carol"]!.stats.reconnects >= 1 && net.clients["carol"]!.stats.decryptionFailures == 0)
        #expect(!net.server.state.messages.values.contains { $0.content.contains("alice 1") })
        // A sender's delivered messages hold their text once: the stored snapshot keeps no
        // second plaintext copy of them (it grew by one per message sent, for good).
        for name in ["alice", "bob"] { #expect(net.clients[name]!.snapshot.ownPlaintexts.isEmpty, "\(name)") }
    }

    @Test("after a long absence the client pages back until it meets what it has: 180 missed group messages, all in order")
    func longAbsence() {
        var (net, group) = ChatNetwork.group(first: "before")
        net.goOffline("carol")
        for n in 0..<180 { net.run("alice", .send(channelID: group, text: "m\(n)")) }
        net.goOnline("carol")
        #expect(net.texts("carol", group) == ["before"] + (0..<180).map { "m\($0)" })
        #expect(net.clients["carol"]!.stats.decryptionFailures == 0)
    }

    @Test("a reconnect asks for little when little is new: the newest 2, then pages back five times longer (10, 50, 100) until one meets a message it has")
    func catchUpPages() {
        var (net, group) = ChatNetwork.group(first: "first")
        var sent = ["first"]
        // Carol is away while Alice sends `count` messages; the pages her catch-up asked for.
        func away(_ count: Int) -> [String] {
            net.goOffline("carol")
            for _ in 0..<count {
                sent.append("m\(sent.count)")
                net.run("alice", .send(channelID: group, text: sent.last!))
            }
            net.pagesAsked["carol"] = []
            net.goOnline("carol")
            #expect(net.texts("carol", group) == sent, "after \(count) missed")
            return net.pagesAsked["carol"]!
        }
        #expect(away(0) == ["2"])
        #expect(away(1) == ["2"])
        #expect(away(3) == ["2", "10 before"])
        #expect(away(180) == ["2", "10 before", "50 before", "100 before", "100 before"])
        #expect(net.clients["carol"]!.stats.decryptionFailures == 0)
    }

    @Test("messages the socket delivers while a catch-up's page is on its way do not end the catch-up early: it pages back to what the device held before")
    func catchUpPastSocketMessages() {
        var (net, group) = ChatNetwork.group(first: "before")
        net.goOffline("carol")
        for text in ["m1", "m2", "m3"] { net.run("alice", .send(channelID: group, text: text)) }
        // Carol's catch-up asks for the newest page; before the answer comes, two newer
        // messages reach her by the socket.
        var carol = net.clients["carol"]!
        let pages = ChatNetwork.requests(carol.handle(.catchUp, now: net.now))
        for text in ["m4", "m5"] { net.run("alice", .send(channelID: group, text: text)) }
        for id in net.server.state.channels[group]!.messageIDs.suffix(2) {
            let frame = JSONValue.object(["type": "message.new", "message": net.server.messageJSON(net.server.state.messages[id]!)])
            _ = carol.handle(.socketText(frame.canonicalText), now: net.now)
        }
        #expect(pages.count == 1)
        var next = pages
        while let (id, request) = next.first {
            next.removeFirst()
            let response = net.server.handle(request, now: net.now).response
            next += ChatNetwork.requests(carol.handle(.response(id: id, response), now: net.now))
        }
        #expect(carol.timeline(group).map(\.text) == ["before", "m1", "m2", "m3", "m4", "m5"])
    }

    @Test("a catch-up in a channel the device held nothing of is not ended by a message it sent since: it pages back to the start")
    func catchUpFromNothingHeld() {
        var (net, group) = ChatNetwork.team(["carol"])
        #expect(net.clients["carol"]!.snapshot.channels[group]?.synced == true && net.texts("carol", group).isEmpty)
        net.goOffline("carol")
        for text in ["m1", "m2", "m3"] { net.run("alice", .send(channelID: group, text: text)) }
        // Carol comes back holding nothing of the channel. The server fails her newest page
        // (503); before she asks again she sends a message of her own, which she then holds.
        net.faults = [.init(who: "carol", path: "/channels/\(group)/messages", kind: .status(503, retryAfter: 5), times: 1)]
        net.offline.remove("carol")
        while net.connectionOf["carol"] == nil { net.advance(.seconds(1)) }
        #expect(net.faults[0].times == 0, "the catch-up's page was failed")
        net.run("carol", .send(channelID: group, text: "mine"))
        #expect(net.texts("carol", group) == ["mine"])
        net.advance(.seconds(10))
        #expect(net.texts("carol", group) == ["m1", "m2", "m3", "mine"])
        #expect(net.clients["carol"]!.stats.decryptionFailures == 0)
    }

    @Test("a catch-up the server keeps failing is not forgotten: the next one pages back past what the socket delivered meanwhile")
    func unfinishedCatchUp() {
        var (net, group) = ChatNetwork.team(["bob", "carol"])
        net.run("alice", .send(channelID: group, text: "before"))
        net.goOffline("carol")
        for text in ["m1", "m2", "m3"] { net.run("alice", .send(channelID: group, text: text)) }
        // Carol comes back, but every page of the channel fails (503) while she is there;
        // meanwhile Bob's first message reaches her by the socket, with his key.
        net.faults = [.init(who: "carol", path: "/channels/\(group)/messages", kind: .status(503, retryAfter: 5), times: 1_000)]
        net.offline.remove("carol")
        while net.connectionOf["carol"] == nil { net.advance(.seconds(1)) }
        net.run("bob", .send(channelID: group, text: "b1"))
        net.advance(.seconds(12))
        #expect(net.texts("carol", group) == ["before", "b1"])
        // She leaves before a page came; the next time the server answers.
        net.goOffline("carol")
        net.faults = []
        net.goOnline("carol")
        #expect(net.texts("carol", group) == ["before", "m1", "m2", "m3", "b1"])
        #expect(net.clients["carol"]!.snapshot.channels[group]?.unfinishedCatchUp == nil)
        #expect(net.clients["carol"]!.stats.decryptionFailures == 0)
    }

    @Test("when a member leaves a group, the next sender key is new: the leaver's key does not open later messages")
    func rotationOnLeave() throws {
        var (net, group) = ChatNetwork.team(["bob", "carol"])
        net.run("alice", .send(channelID: group, text: "all three of us"))
        let carolKeys = net.clients["carol"]!.snapshot.keys!
        let carolToken = net.clients["carol"]!.snapshot.accessToken!
        let leave = net.server.handle(HTTPRequestMessage(method: "POST", target: "/api/v1/channels/\(group)/leave",
                                                         headers: ["authorization": "Bearer \(carolToken)"]), now: net.now)
        #expect(leave.response.status == 204)
        net.advance(.seconds(61))  // alice refreshes the member list before her next group send
        net.run("alice", .send(channelID: group, text: "just us two"))
        #expect(net.texts("bob", group) == ["all three of us", "just us two"])
        let wire = try #require(net.server.state.messages.values.first { $0.senderID == net.userID("alice") && $0.createdAt > net.now - .seconds(1) }?.content)
        var receiver = try #require(carolKeys.receivers[SenderKeyOwner(channel: ChatID(group), device: ChatID(net.clients["alice"]!.deviceID!))]?.first)
        #expect(throws: (any Error).self) { try receiver.decrypt(Base64.decode(wire) ?? []) }
    }

    @Test("keys.low_otp: when others drain a device's one-time keys, the device uploads 20 more")
    func lowOneTimeKeys() {
        var (net, _) = ChatNetwork.pair()
        let bob = net.clients["bob"]!.deviceID!
        for n in 0..<12 {
            net.register("stranger\(n)", username: "stranger\(n)")
            net.run("stranger\(n)", .openDM(userID: net.userID("bob")))
            net.run("stranger\(n)", .send(channelID: net.channelsAdded["stranger\(n)"]!.last!, text: "hello \(n)"))
        }
        #expect(net.clients["bob"]!.stats.replenished >= 1)
        #expect((net.server.state.bundles[bob]?.oneTimeKeys.count ?? 0) >= 10)
        #expect(net.clients["bob"]!.stats.decryptionFailures == 0)
    }

    @Test("moderation: a ban closes the socket and logs the device out; the next login is refused")
    func moderation() {
        var (net, _) = ChatNetwork.pair()
        let adminToken = net.clients["alice"]!.snapshot.accessToken!
        let ban = net.server.handle(HTTPRequestMessage(method: "POST", target: "/api/v1/admin/users/\(net.userID("bob"))/ban",
                                                       headers: ["authorization": "Bearer \(adminToken)"]), now: net.now)
        #expect(ban.response.status == 200)
        for input in net.route(ban.outputs) { net.run(input.0, input.1) }
        #expect(net.loggedOut["bob"] != nil && !net.clients["bob"]!.isConnected)
        net.login("bob-again", username: "bob")
        #expect(net.surfaced["bob-again"] == [.requestFailed(status: 403, detail: "Account banned")])
    }

    @Test("a 401 triggers exactly one refresh and the request is retried; when the refresh fails too, a clean logout")
    func refreshThenLogout() {
        var (net, dm) = ChatNetwork.pair()
        net.now = net.now + .minutes(16)  // every access token has expired
        net.run("alice", .send(channelID: dm, text: "after a coffee"))
        #expect(net.clients["alice"]!.stats.refreshes == 1)
        #expect(net.texts("bob", dm) == ["after a coffee"])
        // The refresh token stops working (sockets stay open, so only the refresh can tell).
        for (key, record) in net.server.state.refreshTokens where record.userID == net.userID("alice") {
            net.server.state.refreshTokens[key]?.state = .revoked
        }
        net.now = net.now + .minutes(16)
        net.run("alice", .send(channelID: dm, text: "never sent"))
        #expect(net.clients["alice"]!.stats.refreshes == 2)
        #expect(net.loggedOut["alice"] != nil && !net.clients["alice"]!.isSignedIn)
    }

    @Test("encryption failure never sends plaintext: the message stays queued and the error is surfaced")
    func noPlaintextFallback() {
        var (net, dm) = ChatNetwork.pair()
        let bob = net.clients["bob"]!.deviceID!
        var forged = net.server.state.bundles[bob]!
        forged.signedPreKey = Base64.encode([UInt8](repeating: 9, count: 32))  // signature no longer matches
        net.server.state.bundles[bob] = forged
        let before = net.server.state.messages.count
        net.run("alice", .send(channelID: dm, text: "secret plans"))
        #expect(net.server.state.messages.count == before)
        guard case .encryptionFailed? = net.surfaced["alice"]?.last else { Issue.record("no error surfaced"); return }
        #expect(net.clients["alice"]!.snapshot.pending.map(\.text) == ["secret plans"])
    }

    @Test("sends made offline wait with their idempotency key; a lost answer is retried without a duplicate")
    func pendingAcrossDisconnects() {
        var (net, dm) = ChatNetwork.pair()
        net.goOffline("alice")
        net.run("alice", .send(channelID: dm, text: "queued while offline"))
        #expect(net.clients["alice"]!.snapshot.pending.count == 1)
        net.goOnline("alice")
        net.loseNextPostAnswer = "alice"
        net.run("alice", .send(channelID: dm, text: "answer lost"))
        net.advance(.seconds(3))
        #expect(net.texts("bob", dm) == ["queued while offline", "answer lost"])
        // Typing goes out on the socket and reaches the peer's connection.
        let frames = net.server.receive(net.connectionOf["alice"]!, text: #"{"type":"typing.start","channel_id":"\#(dm)"}"#, now: net.now)
        #expect(frames.contains { if case .send(let c, let p) = $0 { return c == net.connectionOf["bob"] && p["type"] == "typing.start" }; return false })
        var typist = net.clients["alice"]!
        #expect(typist.handle(.typing(channelID: dm, started: true), now: net.now)
                == [.socketSend(#"{"channel_id":"\#(dm)","type":"typing.start"}"#)])
        #expect(net.server.state.messages.count == 2, "the retried send found its first message")
        #expect(net.clients["alice"]!.snapshot.pending.isEmpty)
    }
}
