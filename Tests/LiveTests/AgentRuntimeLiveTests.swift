import AgentRuntimeClient
import AgentRuntimeServer
import AgentRuntimeWire
import Foundation
import LabKernel
import LabTestSupport
import Testing
@testable import Live

/// The agent runtime on real sockets: what only a real server shows (close codes on the
/// wire, a program as the backend, a restart over the same files, the body limit).
@Suite("Agent runtime over real sockets", .serialized)
struct AgentRuntimeLiveTests {
    static let quick = AgentWorkflow(name: "quick", entryPoint: true, agents: ["Bot"], turns: [[
        .say(agent: "Bot", text: "hello {input}", wordsPerChunk: 1, every: .milliseconds(30)),
        .think(.seconds(3)),
        .say(agent: "Bot", text: "and goodbye", wordsPerChunk: 1, every: .milliseconds(30)),
    ]])
    static let echo = AgentWorkflow(name: "echo", agents: ["Shell"], backend: .command(argv: ["tr", "a-z", "A-Z"], timeout: .seconds(10)), turns: [])
    static let stuck = AgentWorkflow(name: "stuck", agents: ["Shell"], backend: .command(argv: ["sleep", "30"], timeout: .milliseconds(300)), turns: [])

    /// A served runtime over `data`, its base URL, and how to stop it.
    static func serve(_ data: String, maxUpload: Int = 1 << 20) async throws -> (AgentRuntimeLiveServer, String, () async -> Void) {
        let server = try AgentRuntimeLiveServer(dataDirectory: data, workflows: [quick, echo, stuck], seed: 3) { $0.maxUploadBytes = maxUpload }
        let host = LiveHost(configuration: .init(ports: [server.name: 0]), servers: [server])
        let base = try #require(try await host.start().first).url
        return (server, base, { try? await host.stop() })
    }

    static func start(_ base: String, token: String, workflow: String) async throws -> String {
        let reply = try await HTTPProbe.request("POST", base + "/api/chats/acme/\(workflow)/start", body: Data(#"{"user_id":"ada"}"#.utf8),
                                                headers: ["authorization": "Bearer \(token)", "content-type": "application/json"])
        return try #require((try? JSONValue.parse(bytes: Array(reply.body)))?["chat_id"]?.stringValue)
    }

    /// Frames until `done` holds over what arrived, or `seconds` pass.
    static func read(_ socket: WebSocketProbe, seconds: Double = 5, until done: ([RuntimeEnvelope]) -> Bool) async throws -> [RuntimeEnvelope] {
        var frames: [RuntimeEnvelope] = []
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline && !done(frames) {
            if case .text(let text)? = try await offPool({ try socket.receive(timeout: 0.1) }), let envelope = RuntimeEnvelope(text: text) {
                frames.append(envelope)
            }
        }
        return frames
    }

    @Test("a bad or missing token is closed with 1008; a malformed frame gets chat.error and the socket still works")
    func closeCodesAndErrors() async throws {
        let data = TestPaths.scratchDirectory("agent-live-codes").path
        let (_, base, stop) = try await Self.serve(data)
        let port = Int(base.split(separator: ":").last!)!
        let token = try AgentRuntimeLiveServer.mint(app: "acme", user: "ada", dataDirectory: data)
        let chat = try await Self.start(base, token: token, workflow: "quick")
        for query in ["", "?access_token=nope", "?access_token=\(try AgentRuntimeLiveServer.mint(app: "acme", user: "bob", dataDirectory: data))"] {
            let socket = try await offPool { try WebSocketProbe(port: port, target: "/ws/quick/acme/\(chat)/ada\(query)") }
            #expect(try await offPool { try socket.receive(timeout: 30) } == .close(1008), "\(query.prefix(20))")
        }
        let socket = try await offPool { try WebSocketProbe(port: port, target: "/ws/quick/acme/\(chat)/ada?access_token=\(token)&resume=client") }
        _ = try await Self.read(socket) { $0.contains { $0.type == .chatMeta } }
        try socket.send("{not json")
        let error = try await Self.read(socket) { $0.contains { $0.type == .error } }
        #expect(error.last?.data["error_code"] == "SCHEMA_VALIDATION_FAILED")
        try socket.send(ClientMessage.userInput(chatID: chat, text: "world", context: nil, clientMessageID: "1").text)
        let answer = try await Self.read(socket) { $0.contains { $0.data["content"] == "world" && $0.data["agent"] == "Bot" } }
        #expect(answer.contains { $0.type == .inputAck })
        await stop()
    }

    @Test("the command backend streams a program's stdout as chat.text; a program past its timeout is stopped and reported")
    func commandBackend() async throws {
        let data = TestPaths.scratchDirectory("agent-live-command").path
        let (_, base, stop) = try await Self.serve(data)
        let port = Int(base.split(separator: ":").last!)!
        let token = try AgentRuntimeLiveServer.mint(app: "acme", user: "ada", dataDirectory: data)
        let chat = try await Self.start(base, token: token, workflow: "echo")
        let socket = try await offPool { try WebSocketProbe(port: port, target: "/ws/echo/acme/\(chat)/ada?access_token=\(token)&resume=client") }
        try socket.send(ClientMessage.userInput(chatID: chat, text: "make me loud ünïcode", context: nil, clientMessageID: nil).text)
        let frames = try await Self.read(socket) { $0.last?.type == .inputRequest }
        let text = frames.filter { $0.type == .text && $0.data["source"] == "command" }.compactMap { $0.data["content"]?.stringValue }.joined()
        #expect(text == "MAKE ME LOUD üNïCODE")
        #expect(frames.contains { $0.data["final"] == true && $0.data["exit_status"] == 0 })
        let slow = try await Self.start(base, token: token, workflow: "stuck")
        let other = try await offPool { try WebSocketProbe(port: port, target: "/ws/stuck/acme/\(slow)/ada?access_token=\(token)&resume=client") }
        try other.send(ClientMessage.userInput(chatID: slow, text: "wait", context: nil, clientMessageID: nil).text)
        let stopped = try await Self.read(other) { $0.last?.type == .inputRequest }
        #expect(stopped.contains { $0.type == .error && $0.data["error_code"] == "BACKEND_FAILED" })
        await stop()
    }

    @Test("a restart over the same --data keeps the chat resumable: a turn cut by the restart goes on and the replay is complete")
    func restart() async throws {
        let data = TestPaths.scratchDirectory("agent-live-restart").path
        var (server, base, stop) = try await Self.serve(data)
        let token = try AgentRuntimeLiveServer.mint(app: "acme", user: "ada", dataDirectory: data)
        let chat = try await Self.start(base, token: token, workflow: "quick")
        let port = Int(base.split(separator: ":").last!)!
        let socket = try await offPool { try WebSocketProbe(port: port, target: "/ws/quick/acme/\(chat)/ada?access_token=\(token)&resume=client") }
        try socket.send(ClientMessage.userInput(chatID: chat, text: "there", context: nil, clientMessageID: nil).text)
        _ = try await Self.read(socket) { $0.contains { $0.data["content"] == "there" && $0.data["agent"] == "Bot" } }
        let cut = server.lock.withLock { server.server.state.transcripts[chat]!.count }
        await stop()
        (server, base, stop) = try await Self.serve(data)
        let newPort = Int(base.split(separator: ":").last!)!
        let again = try await offPool { try WebSocketProbe(port: newPort, target: "/ws/quick/acme/\(chat)/ada?access_token=\(token)&resume=client") }
        try again.send(ClientMessage.resume(chatID: chat, lastClientIndex: -1).text)
        let replay = try await Self.read(again) { $0.contains { $0.type == .resumeBoundary } }
        #expect(replay.compactMap(\.index) == Array(0..<cut))
        let rest = try await Self.read(again, seconds: 8) { $0.last?.type == .inputRequest }
        #expect(rest.filter { $0.type == .text }.compactMap { $0.data["content"]?.stringValue }.joined() == "and goodbye")
        await stop()
    }

    @Test("an upload over the limit is refused with 413 and JSON; one within it lands under --data by id")
    func uploadLimit() async throws {
        let data = TestPaths.scratchDirectory("agent-live-upload").path
        let (_, base, stop) = try await Self.serve(data, maxUpload: 2_000)
        let token = try AgentRuntimeLiveServer.mint(app: "acme", user: "ada", dataDirectory: data)
        let chat = try await Self.start(base, token: token, workflow: "quick")
        func upload(_ bytes: Int) async throws -> HTTPProbe.Reply {
            let (body, type) = Multipart.encode([
                .init(name: "appId", data: Array("acme".utf8)), .init(name: "userId", data: Array("ada".utf8)), .init(name: "chatId", data: Array(chat.utf8)),
                .init(name: "file", filename: "big.bin", contentType: "application/octet-stream", data: [UInt8](repeating: 7, count: bytes)),
            ], boundary: "xyz")
            return try await HTTPProbe.request("POST", base + "/api/chat/upload", body: Data(body), headers: ["authorization": "Bearer \(token)", "content-type": type])
        }
        let big = try await upload(2_001)
        #expect(big.status == 413 && (try? JSONValue.parse(bytes: Array(big.body)))?["detail"] != nil)
        let small = try await upload(1_500)
        let id = try #require((try? JSONValue.parse(bytes: Array(small.body)))?["attachment_id"]?.stringValue)
        #expect(FileManager.default.contents(atPath: data + "/agent-uploads/\(id)")?.count == 1_500)
        await stop()
    }
}

@Suite("Agent runtime: the live phone driver (HTTPClient and WebSocketClient)", .serialized)
struct LiveAgentPhoneTests {
    @Test("a phone on NIO sockets starts a chat, hears the streamed answer, and a refused token asks for a new one")
    func chat() async throws {
        let data = TestPaths.scratchDirectory("agent-live-phone").path
        let (_, base, stop) = try await AgentRuntimeLiveTests.serve(data)
        let token = try AgentRuntimeLiveServer.mint(app: "acme", user: "ada", dataDirectory: data)
        let http = HTTPClient()
        let phone = try LiveAgentPhone(base: base, client: AgentClient(snapshot: .init(appID: "acme", userID: "ada", token: token, seed: StreamSeed(4))), http: http)
        await phone.feed(.start(workflow: "quick"))
        var answer = ""
        for await effect in phone.effects {
            switch effect {
            case .resumed: if await phone.client.activeChat?.lastIndex == -1 { await phone.feed(.submit(text: "you")) }
            case .applied(let event, _) where event.data["agent"] == "Bot": answer += event.data["content"]?.stringValue ?? ""
            case .inputRequested: await phone.stop()
            default: break
            }
        }
        #expect(answer == "hello youand goodbye")
        let forged = try LiveAgentPhone(base: base, client: AgentClient(snapshot: .init(appID: "acme", userID: "ada", token: "x.y.z", seed: StreamSeed(5))), http: http)
        await forged.feed(.start(workflow: "quick"))
        for await effect in forged.effects {
            if case .authRequired = effect { await forged.stop() }
        }
        #expect(await forged.client.activeChat == nil)
        http.shutdown()
        await stop()
    }
}
