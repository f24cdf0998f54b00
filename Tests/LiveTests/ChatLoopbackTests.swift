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
                let first = try WebSocketProbe(port: bob.port, target: "/ws?ticket=\(ticket)")
                // The socket joined the core before its upgrade was answered: once the client
                // sees it open, its ticket is spent and no event sent to it can be missed.
                #expect(server.lock.withLock { server.server.state.tickets[ticket] == nil })
                let replay = try WebSocketProbe(port: bob.port, target: "/ws?ticket=\(ticket)")
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
