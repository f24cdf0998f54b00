import AIBridgeClient
import AIBridgeDaemon
import AIBridgeRelay
import AIBridgeWire
import Foundation
import LabCrypto
import LabKernel
import LabTestSupport
import ServerStorage
import Testing

@Suite("AI bridge: daemons that go away, restart, hang or lie")
struct DaemonLifecycleTests {
    @Test("no daemon: 503 bridge_offline at once, and the banner says the computer is asleep")
    func offline() throws {
        var world = BridgeWorld.paired()
        world.killDaemon("mac")
        world.feed(phone: "ada", .send(command: "ai_chat", payload: ["conversation_id": "c", "message": "hello"]))
        #expect(world.phones["ada"]?.failed.values.first == .bridgeOffline && world.phones["ada"]?.client.inFlight == 0)
        #expect(BridgeError.bridgeOffline.banner.contains("offline"))
    }

    @Test("a daemon that dies mid-stream ends the stream with an error event")
    func diesMidStream() throws {
        var world = BridgeWorld.paired()
        world.feed(phone: "ada", .send(command: "ai_chat", payload: ["conversation_id": "c", "message": "tell me a long story"]))
        let id = try #require(world.phones["ada"]?.lastStarted)
        world.advance(by: .milliseconds(500))
        #expect(world.phones["ada"]?.text[id]?.isEmpty == false)
        world.killDaemon("mac")
        #expect(world.phones["ada"]?.failed[id] == .bridgeOffline && world.phones["ada"]?.finished[id] == nil)
    }

    @Test("a daemon restarted with a new key pair: the old token is refused (401), the keychain cleared, a new PIN pairs again")
    func restartRequiresRePair() throws {
        var world = BridgeWorld.paired()
        world.killDaemon("mac")
        world.startDaemon("mac", identity: 1, run: 2)
        world.feed(phone: "ada", .send(command: "list_models", payload: [:]))
        #expect(world.phones["ada"]?.failed.values.first == .unauthorized)
        #expect(world.phones["ada"]?.client.isPaired == false && world.relay.state.tokens.isEmpty)
        world.pair("ada", with: "mac")
        world.feed(phone: "ada", .send(command: "list_models", payload: [:]))
        #expect(world.phones["ada"]?.finished.count == 1)
    }

    @Test("a daemon reconnecting with the same key keeps its phones' tokens")
    func reconnectKeepsTokens() throws {
        var world = BridgeWorld.paired()
        world.feed(daemon: "mac", .sleep)
        world.feed(phone: "ada", .send(command: "list_models", payload: [:]))
        #expect(world.phones["ada"]?.failed.values.first == .bridgeOffline)
        world.feed(daemon: "mac", .start)
        world.feed(phone: "ada", .send(command: "list_models", payload: [:]))
        #expect(world.phones["ada"]?.finished.count == 1 && world.phones["ada"]?.client.isPaired == true)
    }

    @Test("a tunnel that drops is dialed again after a jittered backoff")
    func redial() throws {
        var world = BridgeWorld.paired()
        let tunnel = try #require(world.daemons["mac"]?.tunnel)
        world.daemons["mac"]?.tunnel = nil
        world.feed(daemon: "mac", .tunnelClosed)
        _ = world.relay.tunnelClosed(tunnel, now: world.now)
        let at = try #require(world.daemons["mac"]?.core.nextDeadline)
        #expect(at - world.now >= .milliseconds(500) && at - world.now <= .milliseconds(1_500))
        world.advance(by: .seconds(2))
        #expect(world.daemons["mac"]?.core.isConnected == true)
    }

    @Test("a daemon that never answers: the relay answers 504 within its deadline; a stalled stream ends with an error")
    func hangs() throws {
        var world = BridgeWorld()
        world.startDaemon("slow", chat: .scripted(think: .seconds(40), wordsPerChunk: 3, every: .seconds(100)))
        world.addPhone("ada")
        world.pair("ada", with: "slow")
        world.feed(phone: "ada", .send(command: "ai_chat", payload: ["conversation_id": "c", "message": "hi"]))
        let id = try #require(world.phones["ada"]?.lastStarted)
        world.advance(by: .seconds(45))
        #expect(world.phones["ada"]?.text[id]?.isEmpty == false)
        world.advance(by: .seconds(61))
        #expect(world.phones["ada"]?.failed[id] == .timedOut && world.phones["ada"]?.client.inFlight == 0)
    }

    @Test("another key cannot take over a daemon id (trust on first use), and a forged signature is refused")
    func identity() throws {
        var world = BridgeWorld.paired()
        world.killDaemon("mac")
        world.startDaemon("mac", identity: 9, run: 3)
        #expect(world.daemons["mac"]?.effects.contains(.refused(reason: "this daemon id belongs to another key")) == true)
        #expect(world.relay.state.connectedDaemons.isEmpty)
        var relay = BridgeRelay(seed: StreamSeed(1))
        let (tunnel, reply) = relay.tunnelOpened(now: .zero)
        #expect(reply.outputs.count == 1)
        let key = try Ed25519.SigningKey(seed: [UInt8](repeating: 4, count: 32))
        let forged = TunnelMessage.hello(daemonID: "x", identityKey: key.publicKey, serverPublicKey: [UInt8](repeating: 1, count: 32),
                                         signature: key.sign(Array("not the challenge".utf8)))
        #expect(relay.tunnelReceived(tunnel, text: forged.text, now: .zero).outputs == [.tunnelClose(tunnel: tunnel, code: 4401, reason: "bad signature")])
    }

    @Test("the relay's file keeps daemons and token hashes across a restart, and no token or PIN")
    func store() throws {
        var world = BridgeWorld.paired()
        let path = TestPaths.scratchDirectory("bridge-relay").appendingPathComponent("ai-bridge.sqlite").path
        let store = try SQLiteBridgeRelayStore(path: path)
        try store.apply(world.committed)
        let loaded = try SQLiteBridgeRelayStore(path: path).load()
        #expect(loaded.tokens == world.relay.state.tokens && loaded.daemons == world.relay.state.daemons)
        let bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        let token = world.phones["ada"]!.client.snapshot.keychain!.token
        #expect(bytes.range(of: Data(token.utf8)) == nil)
        world.relay = BridgeRelay(state: loaded, seed: StreamSeed(2))
        world.killDaemon("mac")
        world.startDaemon("mac")
        world.feed(phone: "ada", .send(command: "list_models", payload: [:]))
        #expect(world.phones["ada"]?.finished.count == 1, "the same daemon key: the stored token still works")
    }
}
