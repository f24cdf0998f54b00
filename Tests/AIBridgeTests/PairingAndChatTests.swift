import AIBridgeClient
import AIBridgeDaemon
import AIBridgeRelay
import AIBridgeWire
import Foundation
import LabCrypto
import LabKernel
import LabTestSupport
import Testing

@Suite("AI bridge: pairing, sealed chats, refusals")
struct PairingAndChatTests {
    @Test("a PIN pairs a phone: the keychain gets the token and the daemon's 32-byte key; the relay keeps only the token's hash")
    func pairing() throws {
        let world = BridgeWorld.paired()
        let keychain = try #require(world.phones["ada"]?.client.snapshot.keychain)
        #expect(keychain.serverPublicKey == world.daemons["mac"]?.core.keyPair.publicKey && keychain.serverPublicKey.count == 32)
        #expect(keychain.workerURL == RelayConfig().workerURL && keychain.daemonID == "mac" && keychain.token.hasPrefix("ab_"))
        #expect(world.relay.state.tokens.keys.allSatisfy { !$0.contains(keychain.token) } && world.relay.state.tokens.count == 1)
        #expect(!world.committed.contains { "\($0)".contains(keychain.token) }, "what the relay stores holds no token")
        #expect(world.phones["ada"]?.effects.contains(.paired(daemonID: "mac")) == true)
    }

    @Test("a PIN works once; an expired one never; wrong ones are throttled per address and kill the session after five")
    func pinRules() throws {
        var world = BridgeWorld.paired()
        let used = try #require(world.daemons["mac"]?.effects.compactMap { effect -> String? in
            if case .pairingOffered(let pin, _) = effect { return pin }; return nil }.first)
        world.addPhone("eve", peer: "10.6.6.6")
        world.feed(phone: "eve", .pair(pin: used))
        #expect(world.phones["eve"]?.failed.values.first == .pairingRefused, "the first PIN was used up")
        // Five wrong PINs from one address: the sixth try is throttled, another address is not.
        for n in 0..<5 { world.feed(phone: "eve", .pair(pin: String(format: "%06d", n))) }
        world.feed(phone: "eve", .pair(pin: world.daemons["mac"]!.pin!))
        #expect(world.phones["eve"]?.failed.values.contains { if case .tooManyAttempts = $0 { return true }; return false } == true)
        // The open session saw those five wrong PINs: it died, and the daemon opened a new one.
        let dead = world.phones["eve"]!.effects.count
        world.addPhone("bob", peer: "10.0.0.2")
        let afterDeath = world.daemons["mac"]!.pin!
        #expect(world.daemons["mac"]!.effects.contains(.pairingClosed(reason: "too many wrong PINs")))
        world.feed(phone: "bob", .pair(pin: afterDeath))
        #expect(world.phones["bob"]!.client.isPaired && world.phones["eve"]!.effects.count == dead)
        // A PIN past its five minutes is refused.
        world.addPhone("late", peer: "10.0.0.3")
        let expiring = world.daemons["mac"]!.pin!
        world.advance(by: .minutes(5) + .seconds(1))
        world.feed(phone: "late", .pair(pin: expiring))
        #expect(world.phones["late"]?.failed.values.first == .pairingRefused)
    }

    @Test("re-pairing the same phone replaces its token: the old one is refused")
    func rePair() throws {
        var world = BridgeWorld.paired()
        let old = try #require(world.phones["ada"]?.client.snapshot.keychain?.token)
        world.pair("ada", with: "mac")
        let new = try #require(world.phones["ada"]?.client.snapshot.keychain?.token)
        #expect(new != old && world.relay.state.tokens.count == 1)
        let response = world.relay.handle(HTTPRequestMessage(method: "POST", path: "/v1/chat", headers: ["authorization": "Bearer \(old)"],
                                                              body: Array(#"{"command":"list_models","version":1,"payload":{}}"#.utf8)), now: world.now)
        #expect(response.response.status == 401)
    }

    @Test("a sealed ai_chat streams the daemon's answer; the relay forwards ciphertext and never holds the prompt")
    func sealedChat() throws {
        var world = BridgeWorld.paired()
        let marker = "the launch code is 4417"
        world.feed(phone: "ada", .send(command: "ai_chat", payload: ["conversation_id": "c1", "message": .string(marker)]))
        let id = try #require(world.phones["ada"]?.lastStarted)
        let forwarded = world.daemons["mac"]!.core.stats
        #expect(forwarded.sealed == 1)
        world.advance(by: .seconds(5))
        let phone = try #require(world.phones["ada"])
        #expect(phone.text[id] == "I read your 5-word message. Here is a considered answer, streamed in small pieces so the phone can show it as it comes. Ask me to go deeper on any part of it.")
        #expect(phone.finished[id]?["usage"]?["prompt_tokens"] == 5 && phone.failed.isEmpty && phone.client.inFlight == 0)
        #expect(!"\(world.relay.state)".contains("launch code"))
    }

    @Test("plaintext envelopes stay accepted; list_models answers in one response")
    func plaintext() throws {
        var world = BridgeWorld()
        world.startDaemon("mac")
        world.addPhone("ada", seal: false)
        world.pair("ada", with: "mac")
        world.feed(phone: "ada", .send(command: "ai_chat", payload: ["conversation_id": "c1", "message": "hi there", "stream": false]))
        let id = try #require(world.phones["ada"]?.lastStarted)
        #expect(world.phones["ada"]?.finished[id]?["reply"]?.stringValue?.hasPrefix("I read your 2-word message.") == true)
        world.feed(phone: "ada", .send(command: "list_models", payload: [:]))
        #expect(world.phones["ada"]?.finished[world.phones["ada"]!.lastStarted!]?["models"] == ["fleetlab-scripted-1"])
    }

    @Test("an unknown command is 400 unknown_command with the supported list; the app can retry at once")
    func unknownCommand() throws {
        var world = BridgeWorld.paired()
        world.feed(phone: "ada", .send(command: "future_command_that_doesnt_exist", payload: [:]))
        let failed = try #require(world.phones["ada"]?.failed.values.first)
        #expect(failed == .unknownCommand(command: "future_command_that_doesnt_exist", supported: ["ai_chat", "list_models"]))
        #expect(failed.banner.contains("ai_chat"))
        world.feed(phone: "ada", .send(command: "list_models", payload: [:]))
        #expect(world.phones["ada"]?.finished.count == 1)
    }

    @Test("malformed envelopes and payloads get a precise 400 and change nothing")
    func malformed() throws {
        var world = BridgeWorld.paired()
        let token = world.phones["ada"]!.client.snapshot.keychain!.token
        let cases: [(String, Int, String)] = [
            ("not json", 400, "invalid_envelope"), ("[1]", 400, "invalid_envelope"), (#"{"version":1,"payload":{}}"#, 400, "invalid_envelope"),
            (#"{"command":"ai_chat","payload":{}}"#, 400, "invalid_envelope"), (#"{"command":"ai_chat","version":"1","payload":{}}"#, 400, "invalid_envelope"),
            (#"{"command":"ai_chat","version":2,"payload":{}}"#, 400, "unsupported_version"), (#"{"command":"ai_chat","version":1}"#, 400, "invalid_envelope"),
            (#"{"command":"ai_chat","version":1,"payload":[]}"#, 400, "invalid_envelope"), (#"{"command":5,"version":1,"payload":{}}"#, 400, "invalid_envelope"),
            (#"{"sealed":"x"}"#, 400, "invalid_envelope"), (#"{"sealed":{"v":1}}"#, 400, "sealed_payload_invalid"),
            (#"{"command":"ai_chat","version":1,"payload":{"conversation_id":"c"}}"#, 400, "invalid_payload"),
            (#"{"command":"ai_chat","version":1,"payload":{"conversation_id":"c","message":"x","temperature":2}}"#, 400, "invalid_payload"),
            (#"{"command":"list_models","version":1,"payload":{"x":1}}"#, 400, "invalid_payload"),
        ]
        let tokens = world.relay.state.tokens
        for (body, status, code) in cases {
            var answer: HTTPResponseMessage?
            let reply = world.relay.handle(HTTPRequestMessage(method: "POST", path: "/v1/chat", headers: ["authorization": "Bearer \(token)"],
                                                              body: Array(body.utf8)), now: world.now)
            if reply.pending == nil { answer = reply.response } else {
                // The daemon decides: carry the tunnel traffic and read the response output.
                for output in reply.outputs {
                    guard case .tunnelSend(let tunnel, let text) = output else { continue }
                    _ = tunnel
                    let effects = world.daemons["mac"]!.core.handle(.tunnelText(text), now: world.now)
                    for case .send(let sent) in effects {
                        for case .respond(_, let response) in world.relay.tunnelReceived(world.daemons["mac"]!.tunnel!, text: sent, now: world.now).outputs {
                            answer = response
                        }
                    }
                }
            }
            #expect(answer?.status == status && answer?.jsonBody?["error"]?.stringValue == code, "\(body): \(answer.map { String(decoding: $0.body, as: UTF8.self) } ?? "none")")
        }
        #expect(world.relay.state.tokens == tokens)
        let missing = world.relay.handle(HTTPRequestMessage(method: "POST", path: "/v1/pair/confirm", body: Array(#"{"pin":123456}"#.utf8)), now: world.now)
        #expect(missing.response.status == 400 && missing.response.jsonBody?["field"] == "pin")
        let big = world.relay.handle(HTTPRequestMessage(method: "POST", path: "/v1/chat", headers: ["authorization": "Bearer \(token)"],
                                                        body: [UInt8](repeating: 32, count: 300_000)), now: world.now)
        #expect(big.response.status == 413)
    }
}
