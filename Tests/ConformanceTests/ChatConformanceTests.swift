import Foundation
import LabCrypto
import LabKernel
import LabTestSupport
@testable import Live
import SecureChatClient
import SecureChatServer
import Testing

/// d3chat as two phones see it, one test body on both drivers: the server core in process
/// (requests as calls, socket frames through an in-memory hub) and the live server on real
/// HTTP and a real WebSocket.
@Suite("Conformance: d3chat on both drivers", .serialized)
struct ChatConformanceTests {
    enum Driver: String, CaseIterable, Sendable {
        case simulated, loopback
    }

    /// A chat server on one driver and its phones.
    final class Lab {
        let makeDevice: (UInt64) -> any ChatLabDevice
        /// Every stored message's content, as the server holds it.
        let contents: () -> String
        let stop: () async -> Void

        init(_ driver: Driver) async throws {
            switch driver {
            case .simulated:
                var config = ChatServerConfig()
                config.passwordCost = .minimum
                let hub = InProcessChatHub(server: ChatServer(config: config, seed: StreamSeed(9), wallClock: .unixEpoch))
                makeDevice = { InProcessChatDevice(hub: hub, seed: $0) }
                contents = { hub.state.messages.values.map(\.content).joined() }
                stop = {}
            case .loopback:
                let server = try SecureChatLiveServer(dataDirectory: TestPaths.scratchDirectory("conformance-chat").path, passwordCost: .minimum, seed: 9)
                let host = LiveHost(configuration: .init(ports: [server.name: 0]), servers: [server])
                let base = try #require(try await host.start().first).url
                makeDevice = { LoopbackChatDevice(base: base, seed: $0) }
                contents = { server.lock.withLock { server.server.state.messages.values.map(\.content).joined() } }
                stop = { try? await host.stop() }
            }
        }
    }

    @Test("sign-up, an encrypted DM both ways, a group of three messages in order, nothing readable on the server", arguments: Driver.allCases)
    func conversation(driver: Driver) async throws {
        let lab = try await Lab(driver)
        let alice = lab.makeDevice(1), bob = lab.makeDevice(2)
        do {
            try await alice.run(.register(username: "alice", password: "a long password", deviceName: "phone"))
            try await bob.run(.register(username: "bob", password: "a long password", deviceName: "phone"))
            #expect(alice.client.isConnected && bob.client.isConnected)

            try await alice.run(.openDM(userID: try #require(bob.client.userID)))
            let dm = try #require(alice.added.last)
            try await bob.pump(until: { bob.added.contains(dm) })
            try await alice.run(.send(channelID: dm, text: "hello bob"))
            try await bob.pump(until: { bob.texts(dm).count == 1 })
            try await bob.run(.send(channelID: dm, text: "hello alice"))
            try await alice.pump(until: { alice.texts(dm).count == 2 })
            // Bob's own line comes with his POST's answer, or (when a busy machine lost that
            // answer to its deadline) with the socket's echo or the retry: either way it shows.
            try await bob.pump(until: { bob.texts(dm).count == 2 })
            #expect(bob.texts(dm) == ["hello bob", "hello alice"])
            #expect(alice.texts(dm) == ["hello bob", "hello alice"])

            try await alice.run(.createGroup(name: "pair"))
            let group = try #require(alice.added.last)
            try await alice.run(.addMember(channelID: group, userID: try #require(bob.client.userID)))
            try await bob.pump(until: { bob.added.contains(group) })
            for n in 1...3 { try await alice.run(.send(channelID: group, text: "group \(n)")) }
            try await bob.pump(until: { bob.texts(group).count == 3 })
            #expect(bob.texts(group) == ["group 1", "group 2", "group 3"])
            #expect(alice.client.stats.decryptionFailures == 0 && bob.client.stats.decryptionFailures == 0)

            let contents = lab.contents()
            #expect(!contents.isEmpty)
            for text in ["hello bob", "hello alice", "group 1"] { #expect(!contents.contains(text), "the server holds \(text) readable") }
        } catch {
            alice.close()
            bob.close()
            await lab.stop()
            throw error
        }
        alice.close()
        bob.close()
        await lab.stop()
    }
}
