import DesktopBridgeClient
import DesktopBridgeServer
import DesktopBridgeWire
import Foundation
import LabKernel
import LabTestSupport
@testable import Live
import Testing

/// The desktop bridge as phones see it, one body on both drivers and in both dialects:
/// the desktop core in process (virtual time), and the live desktop on a real port with
/// phones on real WebSockets.
@Suite("Conformance: desktop bridge on both drivers, both dialects", .serialized)
struct DesktopConformanceTests {
    enum Driver: String, CaseIterable, Sendable {
        case simulated, loopback
    }

    static func lab(_ driver: Driver) async throws -> any DesktopLab {
        switch driver {
        case .simulated: return InProcessDesktopLab()
        case .loopback:
            let server = try DesktopBridgeLiveServer(dataDirectory: TestPaths.scratchDirectory("conformance-desktop").path, seed: 5)
            let host = LiveHost(configuration: .init(ports: [server.name: 0]), servers: [server])
            let port = try #require(try await host.start().first).port
            return LoopbackDesktopLab(port: port, history: { server.lock.withLock { server.bridge.state.history } }) { try? await host.stop() }
        }
    }

    static func created(_ effects: [DesktopClientEffect]) -> String? {
        effects.lazy.compactMap { if case .sessionCreated(let id) = $0 { return id }; return nil }.last
    }

    /// The turn is over on the desktop: its last update is the answer's last chunk.
    static func turnOver(_ lab: any DesktopLab, _ session: String, turns: Int) -> Bool {
        let history = lab.history[session] ?? []
        let ends = history.filter { if case .agentMessageChunk(let text) = $0.update { return text.hasSuffix("as it comes.") }; return false }.count
        return ends >= turns
    }

    @Test("connect, a session, a streamed turn; a second phone of the other dialect mirrors it; a drop mid-stream rebuilds without duplicates; cancel",
          arguments: Driver.allCases, ACPDialect.allCases)
    func session(driver: Driver, dialect: ACPDialect) async throws {
        let lab = try await Self.lab(driver)
        let phone = try await lab.addPhone(dialect, seed: 11)
        // A starved machine can miss the first handshake's 3 s deadline on loopback; the phone
        // then dials again (backoff, a 10 s deadline), so a connect may take longer than 10 s.
        try await lab.pump(until: { lab.client(phone).isConnected }, seconds: 30)
        #expect(lab.effects(phone).contains { if case .connected(let directory) = $0 { return directory?.hasPrefix("/") == true }; return false })

        let workspace = lab.client(phone).workingDirectory ?? "/workspace"
        try await lab.act(phone, .newSession(cwd: workspace))
        try await lab.pump(until: { Self.created(lab.effects(phone)) != nil })
        let session = try #require(Self.created(lab.effects(phone)))

        // A streamed turn: every update reaches the phone in order, and the phone's
        // timeline is the desktop's history.
        try await lab.act(phone, .prompt(session: session, text: "tidy the parser module and explain why"))
        try await lab.pump(until: { Self.turnOver(lab, session, turns: 1) && lab.client(phone).transcript(session) == lab.desktopTranscript(session) })
        let transcript = lab.client(phone).transcript(session)
        #expect(transcript == lab.desktopTranscript(session) && !transcript.isEmpty)
        #expect(transcript.first == "mode: default_mode" && transcript.dropFirst().first == "user: tidy the parser module and explain why")
        #expect(transcript.contains { $0.hasPrefix("plan: ") } && transcript.contains { $0.hasPrefix("tool call_") } && transcript.contains { $0.hasPrefix("thought: ") })
        #expect(transcript.filter { $0.hasPrefix("agent: ") }.map { String($0.dropFirst(7)) }.joined() == DesktopScript.answer(words: 7))
        switch dialect {
        case .current:
            try await lab.pump(until: { lab.effects(phone).contains(.turnEnded(session: session, stopReason: "end_turn")) })
            #expect(lab.effects(phone).contains(.turnEnded(session: session, stopReason: "end_turn")))
        case .legacy:
            #expect(lab.effects(phone).contains(.promptAccepted(session: session)))
        }

        // A second phone, in the other dialect, attaches and rebuilds the session from history.
        let other = try await lab.addPhone(dialect == .legacy ? .current : .legacy, seed: 12)
        try await lab.pump(until: { lab.client(other).transcript(session) == lab.desktopTranscript(session) }, seconds: 30)
        #expect(lab.client(other).transcript(session) == lab.desktopTranscript(session))

        // A drop mid-stream: the phone dials again, rebuilds, and shows each update once.
        try await lab.act(other, .prompt(session: session, text: "now add tests"))
        try await lab.pump(until: { lab.client(phone).transcript(session).filter { $0.hasPrefix("agent: I looked at") }.count == 2 })
        #expect(!Self.turnOver(lab, session, turns: 2), "the answer is still streaming")
        try await lab.drop(phone)
        #expect(!lab.client(phone).isConnected)
        try await lab.pump(until: { Self.turnOver(lab, session, turns: 2) && lab.client(phone).isConnected
                                    && lab.client(phone).transcript(session) == lab.desktopTranscript(session) }, seconds: 20)
        #expect(lab.client(phone).transcript(session) == lab.desktopTranscript(session), "no update lost or shown twice after the reconnect")
        // One drop, one dial on the simulated clock. On loopback a starved machine can miss a
        // redial's handshake deadline, and the phone dials once more: what it must do.
        let reconnects = lab.client(phone).stats.reconnects
        #expect(driver == .simulated ? reconnects == 1 : reconnects >= 1)
        #expect(lab.client(phone).stats.rebuilds >= 1)
        try await lab.pump(until: { lab.client(other).transcript(session) == lab.desktopTranscript(session) })
        #expect(lab.client(other).transcript(session) == lab.desktopTranscript(session), "the phone that stayed saw it live")

        // Cancel mid-turn: the turn stops; the current dialect's prompt ends `cancelled`.
        try await lab.act(phone, .prompt(session: session, text: "one more thing"))
        try await lab.pump(until: { lab.client(phone).transcript(session).last?.hasPrefix("plan: ") == true })
        try await lab.act(phone, .cancel(session: session, asRequest: dialect == .legacy))
        switch dialect {
        case .current:
            try await lab.pump(until: { lab.effects(phone).contains(.turnEnded(session: session, stopReason: "cancelled")) })
            #expect(lab.effects(phone).contains(.turnEnded(session: session, stopReason: "cancelled")))
        case .legacy:
            try await lab.pump(until: { lab.effects(phone).contains(.answered(method: "session/cancel", result: ["status": "cancelled"])) })
            #expect(lab.effects(phone).contains(.answered(method: "session/cancel", result: ["status": "cancelled"])))
        }
        let afterCancel = lab.desktopTranscript(session).count
        try await lab.pump(until: { false }, seconds: 1.5)
        #expect(lab.desktopTranscript(session).count == afterCancel, "nothing more of the cancelled turn")
        #expect(!Self.turnOver(lab, session, turns: 3))

        // Errors the phone can show: an unknown method, a path outside the workspace.
        try await lab.act(phone, .call(method: "session/teleport", params: [:]))
        try await lab.act(phone, .call(method: "fs/read_text_file", params: dialect.object(["sessionId": .string(session), "path": "../../etc/passwd"])))
        try await lab.pump(until: { lab.effects(phone).filter { if case .failed(.rpc) = $0 { return true }; return false }.count >= 2 })
        let codes = lab.effects(phone).compactMap { if case .failed(.rpc(_, let code, _)) = $0 { return code }; return nil }
        #expect(codes == [-32601, -32602])

        // Files round-trip inside the workspace.
        try await lab.act(phone, .call(method: "fs/write_text_file", params: dialect.object(["sessionId": .string(session), "path": "notes.txt", "content": "pack light"])))
        try await lab.act(phone, .call(method: "fs/read_text_file", params: dialect.object(["sessionId": .string(session), "path": "notes.txt"])))
        try await lab.pump(until: { lab.effects(phone).contains(.answered(method: "fs/read_text_file", result: ["content": "pack light"])) })
        #expect(lab.effects(phone).contains(.answered(method: "fs/read_text_file", result: ["content": "pack light"])))
        await lab.stop()
    }
}
