import AIBridgeClient
import AIBridgeDaemon
import AIBridgeRelay
import AIBridgeWire
import LabKernel
import LabTestSupport
import Testing

/// Hostile requests at the relay and hostile frames on its tunnel, from one seed. Every
/// answer is 2xx or 4xx (a 5xx only as the bridge's own 503/504), nothing a refused request
/// sent is stored, and a trap ends the test process (failing the run).
/// `FLEETLAB_FUZZ_REQUESTS=200000 swift test --filter RelayFuzzTests` runs it longer.
@Suite("AI bridge: fuzzed requests and tunnel frames")
struct RelayFuzzTests {
    static let routes: [RequestFuzzer.Route] = [
        .init("POST", "/v1/pair/confirm", ["pin": "123456", "device_id": "d-1"]),
        .init("POST", "/v1/chat", ["command": "ai_chat", "version": 1, "payload": ["conversation_id": "c", "message": "hello", "stream": true]]),
        .init("POST", "/v1/chat", ["command": "list_models", "version": 1, "payload": [:]]),
        .init("POST", "/v1/chat", ["sealed": ["v": 1, "epk": "AAAA", "nonce": "AAAA", "box": "AAAA"]]),
        .init("GET", "/v1/status"),
        .init("GET", "/v1/health"),
    ]

    static func fixture() -> (BridgeWorld, String) {
        var world = BridgeWorld()
        world.startDaemon("mac")
        world.addPhone("ada", seal: false)
        world.pair("ada", with: "mac")
        return (world, world.phones["ada"]!.client.snapshot.keychain!.token)
    }

    /// Sends a request through the world (the daemon answers what the relay forwards).
    static func send(_ world: inout BridgeWorld, _ request: HTTPRequestMessage) -> HTTPResponseMessage {
        var answer: HTTPResponseMessage?
        let reply = world.relay.handle(request, now: world.now)
        guard reply.pending != nil else { return reply.response }
        for output in reply.outputs {
            guard case .tunnelSend(_, let text) = output else { continue }
            let effects = world.daemons["mac"]!.core.handle(.tunnelText(text), now: world.now)
            for effect in effects {
                guard case .send(let sent) = effect else { continue }
                for output in world.relay.tunnelReceived(world.daemons["mac"]!.tunnel!, text: sent, now: world.now).outputs {
                    switch output {
                    case .respond(_, let response): answer = response
                    case .streamOpen: answer = .empty(200)
                    default: break
                    }
                }
            }
        }
        world.advance(by: .seconds(30))
        return answer ?? .empty(200)
    }

    @Test("every answer to a hostile request is 2xx, 4xx, or the bridge's own 503/504; refusals store nothing", .timeLimit(.minutes(3)))
    func requests() async throws {
        let failures = try await offPool { () -> [String] in
            var fuzzer = RequestFuzzer(defaultSeed: 0xB21D)
            var world = BridgeWorld()
            var token = ""
            var failures: [String] = []
            let outcome = fuzzer.random(Self.routes, count: RequestFuzzer.count(default: 3_000), resetEvery: 200) { _ in
                (world, token) = Self.fixture()
            } headers: { fuzzer in
                fuzzer.percent(85) ? ["authorization": "Bearer \(fuzzer.percent(90) ? token : "ab_" + fuzzer.generator.token(8))"] : [:]
            } send: { request in
                let tokens = world.relay.state.tokens
                let response = Self.send(&world, request)
                if response.status >= 400 && request.path != "/v1/pair/confirm" && world.relay.state.tokens != tokens {
                    failures.append("a refused \(request.path) changed the tokens")
                }
                return (response.status == 503 || response.status == 504) ? .empty(200) : response
            }
            return failures + outcome.failures
        }
        #expect(failures.isEmpty, "\(failures.prefix(5))")
    }

    @Test("tunnel frames: junk from a daemon never traps; junk before hello closes the tunnel", .timeLimit(.minutes(2)))
    func frames() async throws {
        let failures = try await offPool { () -> [String] in
            var fuzzer = RequestFuzzer(defaultSeed: 0x7E11)
            var (world, _) = Self.fixture()
            var failures: [String] = []
            let templates: [JSONValue] = [
                TunnelMessage.pairingOpen(sessionID: "s", pin: "123456", expiresAt: 0).json,
                TunnelMessage.response(requestID: 1, status: 200, body: ["x": 1]).json,
                TunnelMessage.streamChunk(requestID: 1, data: ["text": "x"]).json,
                TunnelMessage.streamEnd(requestID: 1, data: [:]).json,
                TunnelMessage.pairIssued(requestID: 1, token: "t", serverPublicKey: [UInt8](repeating: 1, count: 32)).json,
                TunnelMessage.streamError(requestID: 1, error: "e", message: "m").json,
            ]
            for index in 0..<RequestFuzzer.count(default: 3_000) {
                let text = fuzzer.percent(85) ? fuzzer.mutate(fuzzer.pick(templates)).canonicalText
                    : String(decoding: fuzzer.generator.bytes(Int(fuzzer.generator.next(below: 64))), as: UTF8.self)
                if let tunnel = world.daemons["mac"]?.tunnel {
                    _ = world.relay.tunnelReceived(tunnel, text: text, now: world.now)
                }
                if world.daemons["mac"]?.tunnel == nil || world.relay.state.connectedDaemons.isEmpty { (world, _) = Self.fixture() }
                var fresh = BridgeRelay(seed: StreamSeed(UInt64(index)))
                let (tunnel, _) = fresh.tunnelOpened(now: .zero)
                let reply = fresh.tunnelReceived(tunnel, text: text, now: .zero)
                if !reply.outputs.contains(where: { if case .tunnelClose = $0 { return true }; return false }) {
                    failures.append("an unauthenticated tunnel was not closed: \(fuzzer.replay(index))")
                }
            }
            return failures
        }
        #expect(failures.isEmpty, "\(failures.prefix(5))")
    }
}
