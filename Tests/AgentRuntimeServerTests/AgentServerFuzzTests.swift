import AgentRuntimeServer
import AgentRuntimeWire
import LabKernel
import LabTestSupport
import Testing

/// Hostile requests and frames at every route of the agent runtime core, from one seed.
/// Every answer must be a 2xx or 4xx, and a frame answered with `chat.error` changes
/// nothing; a trap ends the test process (and fails the run).
/// `FLEETLAB_FUZZ_REQUESTS=200000 swift test --filter AgentServerFuzzTests` runs it longer.
@Suite("Agent runtime: fuzzed requests and frames")
struct AgentServerFuzzTests {
    static let routes: [RequestFuzzer.Route] = [
        .init("GET", "/api/workflows"),
        .init("GET", "/api/workflows/config"),
        .init("GET", "/api/workflows/{workflow}/transport"),
        .init("POST", "/api/chats/{app}/{workflow}/start", ["user_id": "ada", "client_request_id": "r-1", "force_new": false]),
        .init("GET", "/api/chats/{app}/{workflow}"),
        .init("GET", "/api/chats/exists/{app}/{workflow}/{chat}"),
        .init("GET", "/api/chats/meta/{app}/{workflow}/{chat}"),
        .init("POST", "/chat/{app}/{chat}/{user}/input", ["message": "hello", "workflow_name": "trip-planner", "client_message_id": "c-1"]),
        .init("POST", "/api/tool-call/respond", ["event_id": "{call}", "response_data": ["text": "yes", "choice": 2]]),
        .init("POST", "/api/chat/upload", ["file": "x"]),
    ]

    /// A runtime with a chat of ada's waiting on a tool call, and a chat of bob's.
    struct Fixture {
        var world = Fixtures.world()
        var tokens: [String] = []

        init(fuzzer: inout RequestFuzzer) {
            let chat = Fixtures.start(&world)
            let other = Fixtures.start(&world, user: "bob")
            let token = world.token(app: "acme", user: "ada")
            _ = world.http("POST", "/chat/acme/\(chat)/ada/input", token: token, json: ["message": "Lima", "workflow_name": "trip-planner"])
            world.advance(by: .seconds(10))
            let call = world.transcript(chat).last { $0.type == .toolCall }?.data["tool_call_id"]?.stringValue ?? "none"
            fuzzer.holes = ["app": ["acme", "globex"], "workflow": ["trip-planner", "support-triage", "general"], "chat": [chat, other],
                            "user": ["ada", "bob"], "call": [call]]
            tokens = [token, world.token(app: "acme", user: "bob"), world.token(app: "globex", user: "ada")]
        }
    }

    @Test("every field of every route's body, set to every edge value, is answered 2xx or 4xx", .timeLimit(.minutes(5)))
    func sweep() async throws {
        let (failures, sent) = try await offPool { Self.sweepBody() }
        #expect(failures.isEmpty, "\(failures.prefix(5))")
        #expect(sent > 800)
    }

    /// Each body runs off the cooperative pool (seconds of CPU on its two threads would
    /// starve the loopback servers other suites run beside this one) and returns what it
    /// found, for the test to judge.
    static func sweepBody() -> (failures: [String], sent: Int) {
        var fuzzer = RequestFuzzer(defaultSeed: 0xA6E7)
        var fixture: Fixture?
        let outcome = fuzzer.sweep(Self.routes) { fuzzer in
            fixture = Fixture(fuzzer: &fuzzer)
            return ["authorization": "Bearer \(fixture!.tokens[0])"]
        } send: { request in
            fixture!.world.advance(by: .milliseconds(10))
            return fixture!.world.http(request)
        }
        return (outcome.failures, outcome.sent)
    }

    @Test("every answer to a hostile request is a 2xx or 4xx", .timeLimit(.minutes(5)))
    func requests() async throws {
        let failures = try await offPool { Self.requestsBody() }
        #expect(failures.isEmpty, "\(failures.prefix(5))")
    }

    static func requestsBody() -> [String] {
        var fuzzer = RequestFuzzer(defaultSeed: 0xA6E7)
        var fixture: Fixture?
        let outcome = fuzzer.random(Self.routes, count: RequestFuzzer.count(default: 5_000), resetEvery: 100) { fuzzer in
            fixture = Fixture(fuzzer: &fuzzer)
        } headers: { fuzzer in
            let token = fuzzer.percent(90) ? fixture!.tokens[Int(fuzzer.generator.next(below: 3))] : "ey.\(fuzzer.generator.token(8)).x"
            return fuzzer.percent(95) ? ["authorization": "Bearer \(token)"] : [:]
        } send: { request in
            fixture!.world.advance(by: .milliseconds(Int64(request.body.count % 500)))
            return fixture!.world.http(request)
        }
        return outcome.failures
    }

    @Test("multipart bodies cut, spliced and filled with junk never trap, and a refused one stores nothing", .timeLimit(.minutes(2)))
    func uploads() async throws {
        let failures = try await offPool { Self.uploadsBody() }
        #expect(failures.isEmpty, "\(failures.prefix(5))")
    }

    static func uploadsBody() -> [String] {
        var failures: [String] = []
        var fuzzer = RequestFuzzer(defaultSeed: 0x0B0D)
        var fixture = Fixture(fuzzer: &fuzzer)
        let chat = fuzzer.holes["chat"]![0]
        let parts = [Multipart.Part(name: "appId", data: Array("acme".utf8)), Multipart.Part(name: "userId", data: Array("ada".utf8)),
                     Multipart.Part(name: "chatId", data: Array(chat.utf8)), Multipart.Part(name: "file", filename: "a.txt", contentType: "text/plain", data: [1, 2, 3])]
        let (valid, type) = Multipart.encode(parts, boundary: "edge")
        for index in 0..<RequestFuzzer.count(default: 3_000) {
            var body = valid
            switch fuzzer.generator.next(below: 4) {
            case 0: body = Array(body.prefix(Int(fuzzer.generator.next(below: UInt64(body.count)))))
            case 1: body.insert(contentsOf: fuzzer.generator.bytes(Int(fuzzer.generator.next(below: 30))), at: Int(fuzzer.generator.next(below: UInt64(body.count))))
            case 2: body = fuzzer.generator.bytes(Int(fuzzer.generator.next(below: 300)))
            default: body[Int(fuzzer.generator.next(below: UInt64(body.count)))] = UInt8(truncatingIfNeeded: fuzzer.generator.next())
            }
            let before = fixture.world.server.state.uploads.count
            let response = fixture.world.http(HTTPRequestMessage(method: "POST", path: "/api/chat/upload",
                                                                 headers: ["authorization": "Bearer \(fixture.tokens[0])",
                                                                           "content-type": fuzzer.percent(90) ? type : "multipart/form-data; boundary=\(fuzzer.generator.token(3))"],
                                                                 body: body))
            if !(200..<500).contains(response.status) { failures.append("status \(response.status): \(fuzzer.replay(index))") }
            if response.status != 200 && fixture.world.server.state.uploads.count != before { failures.append("stored a refused upload: \(fuzzer.replay(index))") }
        }
        return failures
    }

    @Test("socket frames: junk never traps, gets at most one reply, and a refused frame changes nothing", .timeLimit(.minutes(2)))
    func frames() async throws {
        let failures = try await offPool { try Self.framesBody() }
        #expect(failures.isEmpty, "\(failures.prefix(5))")
    }

    static func framesBody() throws -> [String] {
        var failures: [String] = []
        var fuzzer = RequestFuzzer(defaultSeed: 0xF7A3)
        var fixture = Fixture(fuzzer: &fuzzer)
        let chat = fuzzer.holes["chat"]![0]
        guard let socket = Fixtures.socket(&fixture.world, chat: chat) else { return ["the fixture's socket was refused"] }
        _ = fixture.world.take(socket)
        let templates: [JSONValue] = [
            ClientMessage.userInput(chatID: chat, text: "hi", context: ["k": 1], clientMessageID: "c").json,
            ClientMessage.toolCallResponse(toolCallID: fuzzer.holes["call"]![0], response: ["text": "ok"]).json,
            ClientMessage.resume(chatID: chat, lastClientIndex: 3).json,
            ClientMessage.startWorkflow(workflow: "trip-planner", initialMessage: "x").json,
            ClientMessage.startWorkflowBatch([.init(workflow: "trip-planner")]).json,
            ClientMessage.switchWorkflow(chatID: chat, workflow: "trip-planner").json,
        ]
        for index in 0..<RequestFuzzer.count(default: 3_000) {
            let text = fuzzer.percent(85) ? fuzzer.mutate(fuzzer.pick(templates)).canonicalText
                : String(decoding: fuzzer.generator.bytes(Int(fuzzer.generator.next(below: 64))), as: UTF8.self)
            let transcripts = fixture.world.server.state.transcripts, chats = fixture.world.server.state.chats
            fixture.world.send(socket, text)
            let replies = fixture.world.take(socket).envelopes.filter { !$0.type.isTranscript }
            if replies.contains(where: { $0.type == .error }) {
                if replies.count != 1 { failures.append("\(replies.count) replies: \(fuzzer.replay(index))") }
                if fixture.world.server.state.transcripts != transcripts || fixture.world.server.state.chats != chats {
                    failures.append("a refused frame changed state: \(fuzzer.replay(index))")
                }
            }
            if index % 500 == 499 { fixture.world.advance(by: .seconds(30)) }
        }
        return failures
    }
}
