import Foundation
import LabCrypto
import LabKernel
import LabTestSupport
import SecureChatClient
import SecureChatServer
import Testing
@testable import Live

@Suite("Chat over real HTTP and WebSocket")
struct ChatLoopbackTests {
    @Test("a socket joins the chat server when its upgrade is asked for: an event sent before its session starts waits for it; a spent ticket is refused with 4001")
    func joinsBeforeTheUpgrade() async throws {
        let server = try SecureChatLiveServer(dataDirectory: TestPaths.scratchDirectory("chat-join").path, passwordCost: .minimum, seed: 3)
        func call(_ method: String, _ path: String, _ body: JSONValue? = nil, token: String? = nil) throws -> JSONValue {
            var bytes: [UInt8] = []
            body?.write(to: &bytes)
            var headers = ["content-type": "application/json"]
            if let token { headers["authorization"] = "Bearer \(token)" }
            let reply = server.handle(HTTPRequestMessage(method: method, target: "/api/v1" + path, headers: headers, body: bytes))
            #expect(reply.status < 300, "\(method) \(path): \(reply.status) \(String(decoding: reply.body, as: UTF8.self))")
            return try JSONValue.parse(bytes: reply.body)
        }
        let alice = try call("POST", "/auth/register", ["username": "alice", "password": "a long password"])
        let bob = try call("POST", "/auth/register", ["username": "bob", "password": "a long password"])
        let ticket = try #require(try call("POST", "/auth/ws-ticket", token: bob["access_token"]?.stringValue)["ticket"]?.stringValue)

        // Bob's socket is accepted; before its session runs, Alice opens a DM with him.
        guard case .joined(let id, let frames, _) = server.join(ticket: ticket) else { Issue.record("the ticket was refused"); return }
        _ = try call("POST", "/channels/dm", ["user_id": .string(bob["user_id"]?.stringValue ?? "")], token: alice["access_token"]?.stringValue)
        var waiting = frames.makeAsyncIterator()
        guard case .text(let first) = await waiting.next() else { Issue.record("no frame waited for the session"); return }
        #expect(first.contains("channel"), "the DM's event reached the socket that had not started: \(first)")
        #expect(server.lock.withLock { server.handshaking.contains(id) && server.server.state.tickets[ticket] == nil })

        // A ticket used twice is refused with the core's code, before any upgrade.
        guard case .refused(let code, _) = server.join(ticket: ticket) else { Issue.record("a spent ticket joined"); return }
        #expect(code == 4001)
    }

    @Test("the live chat server: a replayed ticket is closed with 4001, no plaintext in its files, a restart keeps everything")
    func loopback() async throws {
        let data = TestPaths.scratchDirectory("chat-live").path
        let server = try SecureChatLiveServer(dataDirectory: data, passwordCost: .minimum, seed: 9)
        let host = LiveHost(configuration: .init(ports: [server.name: 0]), servers: [server])
        let base = try #require(try await host.start().first).url

        let alice = LoopbackChatDevice(base: base, seed: 1), bob = LoopbackChatDevice(base: base, seed: 2)
        do {
            try await alice.run(.register(username: "alice", password: "a long password", deviceName: "phone"))
            try await bob.run(.register(username: "bob", password: "a long password", deviceName: "phone"))
            #expect(alice.client.isConnected && bob.client.isConnected)

            // The exchange itself is the conformance body's (ConformanceTests); here, what
            // only a served server has: its files, its tickets, a restart.
            try await alice.run(.openDM(userID: bob.client.userID!))
            let dm = try #require(alice.added.last)
            try await bob.pump(until: { bob.added.contains(dm) })
            try await alice.run(.send(channelID: dm, text: "hello bob, over a real socket"))
            try await bob.pump(until: { bob.texts(dm).count == 1 })
            try await bob.run(.send(channelID: dm, text: "hello alice"))
            try await alice.pump(until: { alice.texts(dm).count == 2 })
            try await alice.run(.createGroup(name: "pair"))
            let group = try #require(alice.added.last)
            try await alice.run(.addMember(channelID: group, userID: bob.client.userID!))
            try await bob.pump(until: { bob.added.contains(group) })
            for n in 1...3 { try await alice.run(.send(channelID: group, text: "group \(n)")) }
            try await bob.pump(until: { bob.texts(group).count == 3 })

            // The server holds ciphertext only.
            let contents = server.lock.withLock { server.server.state.messages.values.map(\.content).joined() }
            for text in ["hello bob", "hello alice", "group 1"] { #expect(!contents.contains(text)) }

            // A ticket works once: the replay is accepted as a WebSocket and closed with 4001.
            let ticketReply = try await HTTPProbe.request("POST", base + "/api/v1/auth/ws-ticket",
                                                          headers: ["authorization": "Bearer \(bob.client.snapshot.accessToken!)"])
            let ticket = try #require((ticketReply.json as? [String: Any])?["ticket"] as? String)
            do {
                // Off the cooperative pool: the handshake blocks its thread, and this process's
                // servers need the pool's two threads.
                let port = bob.port
                let first = try await offPool { try WebSocketProbe(port: port, target: "/ws?ticket=\(ticket)") }
                // The socket joined the core before its upgrade was answered: once the client
                // sees it open, its ticket is spent and no event sent to it can be missed.
                #expect(server.lock.withLock { server.server.state.tickets[ticket] == nil })
                let replay = try await offPool { try WebSocketProbe(port: port, target: "/ws?ticket=\(ticket)") }
                #expect(try await offPool { try replay.receive(timeout: 30) } == .close(4001))
                withExtendedLifetime(first) {}
            }
        } catch {
            alice.socket = nil
            bob.socket = nil
            try? await host.stop()
            throw error
        }
        // Graceful shutdown waits for open sockets: close the clients' first.
        alice.socket = nil
        bob.socket = nil
        try await host.stop()

        // Nothing of the conversation's plaintext is in the database files.
        for file in ["chat.sqlite", "chat.sqlite-wal"] {
            let bytes = FileManager.default.contents(atPath: data + "/" + file) ?? Data()
            for text in ["hello bob", "hello alice", "group 1", "a long password"] { #expect(bytes.range(of: Data(text.utf8)) == nil, "\(file): \(text)") }
        }
        // A restart over the same data keeps accounts, channels and messages.
        let restarted = try SecureChatLiveServer(dataDirectory: data, passwordCost: .minimum, seed: 10)
        let state = restarted.server.state
        #expect(state.users.count == 2 && state.channels.count == 2 && state.messages.count >= 5)
        let dmID = try #require(state.channels.values.first { $0.isDM }?.id)
        #expect(state.channels[dmID]?.messageIDs.count == 2 && state.isMember(state.userIDByName["alice"]!, of: dmID))
    }
}
