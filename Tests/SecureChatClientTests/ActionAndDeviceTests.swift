import Testing
import ChatCrypto
import LabCrypto
import LabKernel
@testable import SecureChatClient
@testable import SecureChatServer

/// What a user does besides sending (item 4), and devices that come and go (item 1).
@Suite("Chat client: actions and changing devices")
struct ActionAndDeviceTests {
    /// alice, bob and carol in a group `team` created by alice.
    func group() -> (ChatNetwork, String) { ChatNetwork.team(["bob", "carol"]) }

    @Test("edit and delete reach every member re-encrypted; only one's own messages; a DM edit too")
    func editAndDelete() throws {
        var (net, group) = self.group()
        net.run("alice", .send(channelID: group, text: "teh plan"))
        let id = try #require(net.clients["alice"]!.timeline(group).first?.id)
        net.run("alice", .edit(messageID: id, text: "the plan"))
        for name in ["alice", "bob", "carol"] {
            #expect(net.texts(name, group) == ["the plan"] && net.clients[name]!.timeline(group).first?.edited == true, "\(name)")
        }
        #expect(!net.server.state.messages[id]!.content.contains("the plan"), "the edit is ciphertext too")
        net.run("bob", .edit(messageID: id, text: "hijacked"))
        guard case .sendRefused? = net.surfaced["bob"]?.last else { Issue.record("bob edited alice's message"); return }
        net.run("alice", .delete(messageID: id))
        for name in ["alice", "bob", "carol"] { #expect(net.clients[name]!.timeline(group).first?.deleted == true, "\(name)") }
        net.run("alice", .openDM(userID: net.userID("bob")))
        let dm = net.channelsAdded["alice"]!.last!
        net.run("alice", .send(channelID: dm, text: "lunch at 1?"))
        net.run("alice", .edit(messageID: net.clients["alice"]!.timeline(dm)[0].id, text: "lunch at 2?"))
        #expect(net.texts("bob", dm) == ["lunch at 2?"] && net.clients["bob"]!.stats.decryptionFailures == 0)
    }

    @Test("an edit event for a version a catch-up page already brought is not opened again, and an older edit does not replace a newer text")
    func editAfterPage() throws {
        var (net, group) = self.group()
        net.goOffline("carol")
        net.run("alice", .send(channelID: group, text: "teh plan"))
        let id = try #require(net.clients["alice"]!.timeline(group).first?.id)
        /// The `message.edit` frame the server sent the members online for the latest edit.
        func editFrame() -> String {
            let stored = net.server.state.messages[id]!
            return JSONValue.object(["type": "message.edit", "message": ["id": .string(id), "channel_id": .string(group), "content": .string(stored.content),
                                                                        "edited_at": .string(net.server.timestamp(stored.editedAt!))]]).canonicalText
        }
        net.run("alice", .edit(messageID: id, text: "the plan"))
        let first = editFrame()
        net.now = net.now + .seconds(2)
        net.run("alice", .edit(messageID: id, text: "the plan!"))
        let second = editFrame()
        #expect(net.texts("bob", group) == ["the plan!"])
        // Carol catches up: the newest page holds the message as last edited. Then the
        // socket's events for both edits reach her, late.
        net.goOnline("carol")
        #expect(net.texts("carol", group) == ["the plan!"])
        net.run("carol", .socketText(second))
        net.run("carol", .socketText(first))
        #expect(net.texts("carol", group) == ["the plan!"] && net.clients["carol"]!.timeline(group).first?.edited == true)
        #expect(net.clients["carol"]!.stats.decryptionFailures == 0, "\(net.surfaced["carol"] ?? [])")
    }

    @Test("leave: the channel goes from the leaver's list, the others hear it, and the next sender key is new")
    func leave() {
        var (net, group) = self.group()
        net.run("alice", .send(channelID: group, text: "hello all"))
        net.run("carol", .leave(channelID: group))
        #expect(net.channelsRemoved["carol"] == [group] && net.clients["carol"]!.snapshot.channels[group] == nil)
        let rotations = net.clients["alice"]!.stats.senderKeyRotations
        net.run("alice", .send(channelID: group, text: "without carol"))
        #expect(net.clients["alice"]!.stats.senderKeyRotations == rotations + 1, "rotated at once on channel.member_left, not a minute later")
        #expect(net.texts("bob", group) == ["hello all", "without carol"])
    }

    @Test("loadOlder pages back through history page by page until the start (a legacy plaintext group a web client fills)")
    func olderHistory() {
        var net = ChatNetwork()
        net.register("alice", username: "alice")
        net.register("dave", username: "dave")
        let group = net.direct("alice", "POST", "/channels", ["name": "lobby", "visibility": "public", "legacy_plaintext": true]).jsonBody?["id"]?.stringValue ?? ""
        for n in 0..<120 { net.direct("alice", "POST", "/channels/\(group)/messages", ["content": .string("m\(n)")]) }
        net.run("dave", .join(channelID: group))
        #expect(net.texts("dave", group).count == 50, "the newest page on joining")
        var pages = 0
        while net.clients["dave"]!.snapshot.channels[group]?.reachedStart != true && pages < 10 {
            net.run("dave", .loadOlder(channelID: group))
            pages += 1
        }
        #expect(pages == 2 && net.texts("dave", group) == (0..<120).map { "m\($0)" })
        let loaded = (net.events["dave"] ?? []).compactMap { effect -> Int? in
            if case .historyLoaded(_, let added, _) = effect { return added }
            return nil
        }
        #expect(loaded == [50, 20])
        net.run("dave", .loadOlder(channelID: group))
        #expect(net.events["dave"]?.last == .historyLoaded(channelID: group, added: 0, hasMore: false), "at the start: nothing is asked")
    }

    @Test("typing and presence reach the others' apps as events; a typing indicator lapses by itself")
    func typingAndPresence() {
        var (net, group) = self.group()
        net.run("alice", .typing(channelID: group, started: true))
        #expect(net.events["bob"]?.last == .typing(channelID: group, userID: net.userID("alice"), active: true))
        net.advance(.seconds(7))
        #expect(net.events["bob"]?.last == .typing(channelID: group, userID: net.userID("alice"), active: false))
        net.run("alice", .setPresence("away"))
        #expect(net.events["carol"]?.last == .presence(userID: net.userID("alice"), status: "away"))
    }

    @Test("logout ends this device's login only; logout-all ends every device of the user")
    func logouts() {
        var net = ChatNetwork()
        net.register("alice", username: "alice")
        net.login("alice-tablet", username: "alice")
        net.login("alice-laptop", username: "alice")
        net.run("alice", .logout)
        #expect(net.loggedOut["alice"] != nil && net.connectionOf["alice"] == nil && !net.clients["alice"]!.isSignedIn)
        #expect(net.clients["alice-tablet"]!.isConnected && net.clients["alice-laptop"]!.isConnected)
        net.run("alice-tablet", .logoutAll)
        #expect(net.loggedOut["alice-laptop"] != nil && !net.clients["alice-laptop"]!.isConnected, "the server closed the other devices")
        #expect(!net.server.state.refreshTokens.values.contains { $0.state == .active })
    }

    @Test("a phone added later reads from the next message on; a deleted one is closed, logged out, and no longer encrypted to")
    func devicesComeAndGo() throws {
        var (net, group) = self.group()
        net.run("alice", .openDM(userID: net.userID("bob")))
        let dm = net.channelsAdded["alice"]!.last!
        net.run("alice", .send(channelID: dm, text: "before the tablet"))
        net.run("alice", .send(channelID: group, text: "group before the tablet"))
        net.login("bob-tablet", username: "bob")
        net.run("alice", .send(channelID: dm, text: "after the tablet"))
        net.run("alice", .send(channelID: group, text: "group after the tablet"))
        #expect(net.texts("bob-tablet", dm).contains("after the tablet"))
        #expect(net.texts("bob-tablet", group).contains("group after the tablet"))
        #expect(net.clients["bob-tablet"]!.stats.decryptionFailures == 0)

        // The tablet is lost: bob deletes it from his phone.
        let tablet = net.clients["bob-tablet"]!.deviceID!
        let tabletReceiver = net.clients["bob-tablet"]!.snapshot.keys!.receivers[SenderKeyOwner(channel: ChatID(group), device: ChatID(net.clients["alice"]!.deviceID!))]?.first
        let delete = net.server.handle(HTTPRequestMessage(method: "DELETE", target: "/api/v1/devices/\(tablet)",
                                                          headers: ["authorization": "Bearer \(net.clients["bob"]!.snapshot.accessToken!)"]), now: net.now)
        #expect(delete.response.status == 204)
        for input in net.route(delete.outputs) { net.run(input.0, input.1) }
        #expect(net.loggedOut["bob-tablet"] != nil && !net.clients["bob-tablet"]!.isSignedIn)
        let rotations = net.clients["alice"]!.stats.senderKeyRotations
        net.run("alice", .send(channelID: dm, text: "tablet gone"))
        net.run("alice", .send(channelID: group, text: "group, tablet gone"))
        #expect(net.clients["alice"]!.stats.senderKeyRotations == rotations + 1)
        let dmWire = try #require(net.server.state.messages.values.first { $0.channelID == dm && $0.createdAt == net.server.state.messages.values.filter { $0.channelID == dm }.map(\.createdAt).max() })
        #expect(ChatEnvelope.decode(dmWire.content)?.to[tablet] == nil, "the DM is not encrypted to the deleted tablet")
        let groupWire = try #require(net.server.state.messages.values.filter { $0.channelID == group && $0.contentType == "text" }.max { $0.createdAt < $1.createdAt })
        var receiver = try #require(tabletReceiver)
        #expect(throws: (any Error).self) { try receiver.decrypt(Base64.decode(groupWire.content) ?? []) }
        #expect(net.texts("bob", dm).suffix(1) == ["tablet gone"] && net.texts("bob", group).suffix(1) == ["group, tablet gone"])
    }

    @Test("a sender who missed devices.changed is told by a 409 and re-sends to the new device: no message skips it")
    func mismatchRetried() {
        var (net, dm) = ChatNetwork.pair()
        net.run("alice", .send(channelID: dm, text: "hi"))
        net.goOffline("alice")
        net.login("bob-tablet", username: "bob")  // alice's socket is down: the event never reaches her
        net.goOnline("alice")
        net.run("alice", .send(channelID: dm, text: "for both of bob's devices"))
        #expect(net.texts("bob-tablet", dm).contains("for both of bob's devices"))
        #expect(net.texts("bob", dm) == ["hi", "for both of bob's devices"], "once, not twice")
        #expect(net.clients["alice"]!.snapshot.pending.isEmpty && net.clients["alice"]!.stats.deviceSetFetches >= 3)
    }
}
