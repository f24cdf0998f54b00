import AgentRuntimeClient
import AgentRuntimeServer
import AgentRuntimeWire
import Foundation
import LabKernel
import LabTestSupport
@testable import Live
import Testing

/// The agent runtime as a phone sees it, one test body on both drivers: the server core in
/// process (requests as calls, frames through an in-memory hub, wake-ups on the wall
/// clock) and the live server on real HTTP and a real WebSocket.
@Suite("Conformance: agent runtime on both drivers", .serialized)
struct AgentConformanceTests {
    enum Driver: String, CaseIterable, Sendable {
        case simulated, loopback
    }

    static let key = Array("conformance key, thirty-two byte".utf8)
    static let workflow = AgentWorkflow(name: "planner", entryPoint: true, agents: ["Planner"], turns: [[
        .think(.milliseconds(100)),
        .say(agent: "Planner", text: "Let me think about {input} for a moment, then propose a plan you can approve.", wordsPerChunk: 2,
             every: .milliseconds(40)),
        .usage(promptTokens: 50, completionTokens: 20),
        .toolCall(AgentToolCallStep(name: "propose", agent: "Planner", component: "ActionPlan", display: "inline", awaitsResponse: true,
                                    payload: ["steps": ["one", "two"]])),
        .say(agent: "Planner", text: "Done: {response}.", wordsPerChunk: 3, every: .milliseconds(20)),
    ]])

    final class Lab {
        let makeDevice: (String, UInt64) -> any AgentLabDevice
        let transcript: (String) -> [String]
        let stop: () async -> Void

        init(_ driver: Driver) async throws {
            switch driver {
            case .simulated:
                var config = AgentServerConfig()
                config.tokenKey = AgentConformanceTests.key
                config.workflows = [AgentConformanceTests.workflow]
                let hub = InProcessAgentHub(server: AgentServer(config: config, seed: StreamSeed(5), wallClock: .unixEpoch))
                makeDevice = { InProcessAgentDevice(hub: hub, app: "acme", user: "ada", token: $0, seed: $1) }
                transcript = { hub.transcripts[$0] ?? [] }
                stop = {}
            case .loopback:
                let directory = TestPaths.scratchDirectory("conformance-agent").path
                let server = try AgentRuntimeLiveServer(dataDirectory: directory, workflows: [AgentConformanceTests.workflow], seed: 5) {
                    $0.tokenKey = AgentConformanceTests.key
                }
                let host = LiveHost(configuration: .init(ports: [server.name: 0]), servers: [server])
                let base = try #require(try await host.start().first).url
                makeDevice = { LoopbackAgentDevice(base: base, app: "acme", user: "ada", token: $0, seed: $1) }
                transcript = { chat in server.lock.withLock { server.server.state.transcripts[chat] ?? [] } }
                stop = { try? await host.stop() }
            }
        }
    }

    static func token() -> String {
        let seconds = Int64(Date().timeIntervalSince1970)
        return RuntimeToken(appID: "acme", userID: "ada", issuedAt: seconds, expiresAt: seconds + 3_600).sign(key: key)
    }

    @Test("start, a streamed answer, a drop mid-stream and resume, a tool call, an upload: the timeline equals the transcript", arguments: Driver.allCases)
    func chat(driver: Driver) async throws {
        let lab = try await Lab(driver)
        let phone = lab.makeDevice(Self.token(), 11)
        do {
            try await phone.run(.start(workflow: nil))
            try await phone.pump(until: { phone.client.isConnected })
            #expect(phone.client.isConnected)
            let chat = try #require(phone.client.activeChat?.chatID)

            try await phone.run(.submit(text: "Lisbon"))
            try await phone.pump(until: { phone.client.messages().count >= 2 }, seconds: 30)
            #expect(phone.client.messages().last?.agent == "Planner", "the answer started streaming")
            try await phone.dropSocket()
            #expect(!phone.client.isConnected)
            try await phone.pump(until: { phone.client.isConnected && phone.client.activeChat?.awaitingToolCall != nil }, seconds: 30)
            #expect(phone.client.stats.reconnects == 1 && phone.client.stats.resumes >= 2 && phone.client.stats.replayed > 0)
            #expect(phone.client.messages().map(\.text).contains("Let me think about Lisbon for a moment, then propose a plan you can approve."))

            let call = try #require(phone.client.activeChat?.awaitingToolCall)
            try await phone.run(.respond(toolCallID: call, response: ["text": "approved"]))
            try await phone.pump(until: { phone.client.messages().last?.text == "Done: approved." })
            #expect(phone.client.messages().last?.text == "Done: approved.")

            try await phone.run(.upload(filename: "notes.txt", contentType: "text/plain", bytes: Array("pack light".utf8), intent: "context"))
            try await phone.pump(until: { phone.client.activeChat?.timeline.last?.contains("chat.attachment_uploaded") == true })
            #expect(phone.client.activeChat?.timeline == lab.transcript(chat))
            #expect(phone.client.stats.duplicatesIgnored == 0 && phone.client.activeChat?.pending.isEmpty == true)
        } catch {
            phone.close()
            await lab.stop()
            throw error
        }
        phone.close()
        await lab.stop()
    }

    @Test("a bad token: the start is refused with 401 and the app is asked for a new token", arguments: Driver.allCases)
    func badToken(driver: Driver) async throws {
        let lab = try await Lab(driver)
        let phone = lab.makeDevice("forged.token.here", 12)
        try await phone.run(.start(workflow: nil))
        #expect(phone.client.activeChat == nil && phone.client.nextDeadline == nil)
        phone.close()
        await lab.stop()
    }
}
