import DesktopBridgeServer
import DesktopBridgeWire
import Foundation
import LabKernel
import LabTestSupport
import Testing
@testable import Live

/// JSON-RPC over one real WebSocket: calls by id, notifications kept as they come.
final class RPCSocket: @unchecked Sendable {
    let probe: WebSocketProbe
    var notifications: [JSONValue] = []
    var nextID = 1

    init(port: Int) async throws {
        probe = try await offPool { try WebSocketProbe(port: port, target: "/") }
    }

    /// Sends a request and waits (at most `seconds`) for its answer: the whole response object.
    func call(_ method: String, _ params: JSONValue = [:], seconds: Double = 10) async throws -> JSONValue {
        let id = nextID
        nextID += 1
        try probe.send(RPCMessage.request(id: .number(Double(id)), method: method, params: params).text)
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            let probe = probe
            guard case .text(let text)? = try await offPool({ try probe.receive(timeout: 0.2) }), let value = try? JSONValue.parse(text) else { continue }
            if value["id"] == .number(Double(id)) { return value }
            if value["method"] != nil { notifications.append(value) }
        }
        throw CancellationError()
    }

    /// Reads notifications until `done` holds over them, or `seconds` pass.
    func collect(until done: ([JSONValue]) -> Bool, seconds: Double = 10) async throws {
        let deadline = Date().addingTimeInterval(seconds)
        while !done(notifications) && Date() < deadline {
            let probe = probe
            guard case .text(let text)? = try await offPool({ try probe.receive(timeout: 0.2) }), let value = try? JSONValue.parse(text) else { continue }
            if value["method"] != nil { notifications.append(value) }
        }
    }

    func initialize() async throws {
        let answer = try await call("initialize", ["protocolVersion": 1, "clientCapabilities": [:]])
        precondition(answer["result"] != nil)
    }
}

/// The desktop bridge on real sockets: what only a real desktop shows (the filesystem
/// with its symlinks, programs, a restart over the same history).
@Suite("Desktop bridge over real sockets", .serialized)
struct DesktopBridgeLiveTests {
    static func serve(_ data: String, workspace: String? = nil, allowTerminal: Bool = false, agents: [String: [String]] = [:],
                      configure: @escaping (inout DesktopConfig) -> Void = { _ in }) async throws -> (DesktopBridgeLiveServer, Int, () async -> Void) {
        let server = try DesktopBridgeLiveServer(dataDirectory: data, workspace: workspace, allowTerminal: allowTerminal, agents: agents, seed: 9,
                                                 configure: configure)
        let host = LiveHost(configuration: .init(ports: [server.name: 0]), servers: [server])
        let port = try #require(try await host.start().first).port
        return (server, port, { try? await host.stop() })
    }

    static func code(_ answer: JSONValue) -> Int? { answer["error"]?["code"]?.numberValue.map { Int($0) } }

    @Test("writes and reads of a file sent back to back are answered in order: each read sees the write before it")
    func fileOrder() async throws {
        let (server, port, stop) = try await Self.serve(TestPaths.scratchDirectory("desktop-file-order").path)
        let socket = try await RPCSocket(port: port)
        try await socket.initialize()
        let session = try #require(try await socket.call("session/new", ["cwd": .string(server.workspace)])["result"]?["sessionId"]?.stringValue)
        // Forty pairs without waiting in between: ids 100, 102, … write; 101, 103, … read.
        for pair in 0..<40 {
            try socket.probe.send(RPCMessage.request(id: .number(Double(100 + 2 * pair)), method: "fs/write_text_file",
                                                     params: ["sessionId": .string(session), "path": "order.txt", "content": .string("draft \(pair)")]).text)
            try socket.probe.send(RPCMessage.request(id: .number(Double(101 + 2 * pair)), method: "fs/read_text_file",
                                                     params: ["sessionId": .string(session), "path": "order.txt"]).text)
        }
        var read: [Int: String] = [:]
        let deadline = Date().addingTimeInterval(20)
        while read.count < 40, Date() < deadline {
            let probe = socket.probe
            guard case .text(let text)? = try await offPool({ try probe.receive(timeout: 0.2) }), let value = try? JSONValue.parse(text),
                  let id = value["id"]?.numberValue.map({ Int($0) }), id % 2 == 1 else { continue }
            read[(id - 101) / 2] = value["result"]?["content"]?.stringValue ?? "error: \(value)"
        }
        #expect(read.count == 40)
        let stale = read.filter { $0.value != "draft \($0.key)" }
        #expect(stale.isEmpty, "reads that did not see the write before them: \(stale.sorted { $0.key < $1.key }.prefix(5))")
        await stop()
    }

    @Test("files stay in the workspace: a symlink out is refused for reading and writing, .. cannot climb, a file inside round-trips")
    func confinement() async throws {
        let data = TestPaths.scratchDirectory("desktop-files").path
        let outside = TestPaths.scratchDirectory("desktop-outside").path
        try "secret".write(toFile: outside + "/secret.txt", atomically: true, encoding: .utf8)
        let (server, port, stop) = try await Self.serve(data)
        let workspace = server.workspace
        try FileManager.default.createSymbolicLink(atPath: workspace + "/escape", withDestinationPath: outside)
        try FileManager.default.createSymbolicLink(atPath: workspace + "/secret-link.txt", withDestinationPath: outside + "/secret.txt")
        let socket = try await RPCSocket(port: port)
        try await socket.initialize()
        let session = try #require(try await socket.call("session/new", ["cwd": .string(workspace)])["result"]?["sessionId"]?.stringValue)
        func read(_ path: String) async throws -> JSONValue {
            try await socket.call("fs/read_text_file", ["sessionId": .string(session), "path": .string(path)])
        }
        for path in ["escape/secret.txt", "secret-link.txt", workspace + "/escape/secret.txt", "../../../../etc/passwd", "/etc/passwd"] {
            let answer = try await read(path)
            #expect(Self.code(answer) == -32602 && answer["result"] == nil, "\(path): \(answer)")
        }
        let write = try await socket.call("fs/write_text_file", ["sessionId": .string(session), "path": "escape/planted.txt", "content": "x"])
        #expect(Self.code(write) == -32602 && !FileManager.default.fileExists(atPath: outside + "/planted.txt"))
        // Writing over the symlinked file replaces the link in the workspace; the target is untouched.
        _ = try await socket.call("fs/write_text_file", ["sessionId": .string(session), "path": "secret-link.txt", "content": "mine"])
        #expect(try String(contentsOfFile: outside + "/secret.txt", encoding: .utf8) == "secret")
        #expect(Self.code(try await read("missing.txt")) == RPCError.resourceNotFoundCode)

        let wrote = try await socket.call("fs/write_text_file", ["sessionId": .string(session), "path": "docs/../notes.txt", "content": "one\ntwo\nthree"])
        #expect(wrote["result"] == [:])
        #expect(try String(contentsOfFile: workspace + "/notes.txt", encoding: .utf8) == "one\ntwo\nthree")
        let slice = try await socket.call("fs/read_text_file", ["sessionId": .string(session), "path": "notes.txt", "line": 2, "limit": 1])
        #expect(slice["result"]?["content"] == "two")
        let terminal = try await socket.call("terminal/run", ["sessionId": .string(session), "command": ["echo", "hi"]])
        #expect(Self.code(terminal) == -32601, "terminal/run is off unless --allow-terminal")
        await stop()
    }

    @Test("with --allow-terminal a program runs in the workspace with its output capped and its time limited")
    func terminal() async throws {
        let (server, port, stop) = try await Self.serve(TestPaths.scratchDirectory("desktop-terminal").path, allowTerminal: true) {
            $0.terminalTimeout = .seconds(2)
        }
        let socket = try await RPCSocket(port: port)
        try await socket.initialize()
        let session = try #require(try await socket.call("session/new", ["cwd": .string(server.workspace)])["result"]?["sessionId"]?.stringValue)
        let pwd = try await socket.call("terminal/run", ["sessionId": .string(session), "command": ["pwd"]])
        #expect(pwd["result"]?["output"] == .string(server.workspace + "\n") && pwd["result"]?["exitStatus"] == 0 && pwd["result"]?["truncated"] == false)
        let capped = try await socket.call("terminal/run", ["sessionId": .string(session), "command": ["yes"], "outputByteLimit": 100])
        #expect(capped["result"]?["output"]?.stringValue?.utf8.count == 100 && capped["result"]?["truncated"] == true
                && capped["result"]?["exitStatus"] == .null, "a program past the cap is stopped there")
        let slow = try await socket.call("terminal/run", ["sessionId": .string(session), "command": ["sh", "-c", "echo started; sleep 30"]])
        #expect(slow["result"]?["output"] == "started\n" && slow["result"]?["exitStatus"] == .null && slow["result"]?["truncated"] == true,
                "the 2 s limit stops it: \(slow)")
        let failing = try await socket.call("terminal/run", ["sessionId": .string(session), "command": ["sh", "-c", "exit 4"]])
        #expect(failing["result"]?["exitStatus"] == 4)
        let outside = try await socket.call("terminal/run", ["sessionId": .string(session), "command": ["pwd"], "cwd": "/tmp"])
        #expect(Self.code(outside) == -32602)
        await stop()
    }

    @Test("a mode backed by an ACP agent program: its updates reach the phone, its file request is refused, a crash mid-turn is an error")
    func agentProgram() async throws {
        let agent = TestPaths.packageRoot.appendingPathComponent("Tests/Fixtures/fake-acp-agent.py").path
        let (server, port, stop) = try await Self.serve(TestPaths.scratchDirectory("desktop-program").path, agents: ["codex": ["python3", agent]])
        let socket = try await RPCSocket(port: port)
        try await socket.initialize()
        let session = try #require(try await socket.call("session/new", ["cwd": .string(server.workspace), "modeId": "codex"])["result"]?["sessionId"]?.stringValue)
        let answer = try await socket.call("session/prompt", ["sessionId": .string(session), "prompt": [["type": "text", "text": "hello there"]]])
        #expect(answer["result"]?["stopReason"] == "end_turn", "\(answer)")
        try await socket.collect(until: { $0.count >= 6 })
        let texts = socket.notifications.compactMap { $0["params"]?["update"]?["content"]?["text"]?.stringValue }
        #expect(texts == ["hello there", "the desktop answered -32601", "The program ", "read: ", "HELLO THERE"])
        let crash = try await socket.call("session/prompt", ["sessionId": .string(session), "prompt": [["type": "text", "text": "crash now"]]])
        #expect(Self.code(crash) == -32603, "\(crash)")
        let claude = try #require(try await socket.call("session/new", ["cwd": .string(server.workspace), "modeId": "claude-code"])["result"]?["sessionId"]?.stringValue)
        let missing = try await socket.call("session/prompt", ["sessionId": .string(claude), "prompt": [["type": "text", "text": "hi"]]])
        #expect(Self.code(missing) == -32601 && missing["error"]?["message"] == "Claude Code is not available. Please install the required CLI.")
        await stop()
    }

    @Test("a restart over the same --data keeps every session's history; a phone rebuilds the same timeline")
    func restart() async throws {
        let data = TestPaths.scratchDirectory("desktop-restart").path
        var (server, port, stop) = try await Self.serve(data)
        var socket = try await RPCSocket(port: port)
        try await socket.initialize()
        let session = try #require(try await socket.call("session/new", ["cwd": .string(server.workspace)])["result"]?["sessionId"]?.stringValue)
        _ = try await socket.call("tinyvex/history.setSessionTitle", ["sessionId": .string(session), "title": "parser work"])
        let prompt = try await socket.call("session/prompt", ["sessionId": .string(session), "prompt": [["type": "text", "text": "go"]]])
        #expect(prompt["result"]?["stopReason"] == "end_turn")
        let before = try await socket.call("tinyvex/history.sessionTimeline", ["sessionId": .string(session)])
        await stop()

        (server, port, stop) = try await Self.serve(data)
        socket = try await RPCSocket(port: port)
        let early = try await socket.call("tinyvex/history.recentSessions")
        #expect(Self.code(early) == RPCError.notInitializedCode)
        try await socket.initialize()
        let recent = try await socket.call("tinyvex/history.recentSessions")
        #expect(recent["result"]?.arrayValue?.first?["sessionId"] == .string(session))
        let after = try await socket.call("tinyvex/history.sessionTimeline", ["sessionId": .string(session)])
        #expect(after["result"] == before["result"] && (after["result"]?.arrayValue?.count ?? 0) > 10)
        #expect(try await socket.call("tinyvex/history.getSessionTitle", ["sessionId": .string(session)])["result"]?["title"] == "parser work")
        #expect(try await socket.call("tinyvex/history.deleteSession", ["sessionId": .string(session)])["result"]?["deleted"] == true)
        #expect(Self.code(try await socket.call("tinyvex/history.sessionTimeline", ["sessionId": .string(session)])) == RPCError.resourceNotFoundCode)
        await stop()
    }
}
