import AgentRuntimeClient
import AgentRuntimeServer
import AgentRuntimeWire
import Foundation
import LabKernel
import LabTestSupport
import Testing

/// The workflows these tests play: a short turn with a tool call, inline.
enum Scripts {
    static let quick = AgentWorkflow(name: "quick", entryPoint: true, agents: ["Bot"], turns: [
        [.think(.milliseconds(200)), .say(agent: "Bot", text: "one two three four five six", wordsPerChunk: 2, every: .milliseconds(100)),
         .toolCall(AgentToolCallStep(name: "plan", agent: "Bot", component: "ActionPlan", display: "inline", awaitsResponse: true, payload: ["a": 1])),
         .say(agent: "Bot", text: "got {response}", wordsPerChunk: 5, every: .milliseconds(50))],
        [.say(agent: "Bot", text: "again: {input}", wordsPerChunk: 5, every: .milliseconds(50)),
         .toolCall(AgentToolCallStep(name: "odd", agent: "Bot", component: "HoloDeck", display: "inline", awaitsResponse: false, payload: [:])),
         .complete(summary: "done")],
    ])
    static let other = AgentWorkflow(name: "other", agents: ["Bot"], turns: [[.say(agent: "Bot", text: "hi", wordsPerChunk: 1, every: .zero)]])

    static func world() -> AgentWorld { AgentWorld(workflows: [other, quick]) }
}

@Suite("Agent runtime client core")
struct AgentClientTests {
    func phone(_ world: AgentWorld, seed: UInt64 = 1, user: String = "ada") -> AgentPhone {
        AgentPhone(app: "acme", user: user, token: world.token(app: "acme", user: user), seed: seed)
    }

    @Test("startup: discovery, the entry point, a start with a client_request_id, the socket with resume=client, then client.resume from -1")
    func startup() throws {
        var world = Scripts.world()
        var ada = phone(world)
        ada.run(.start(workflow: nil), in: &world)
        let requests = ada.effects.compactMap { effect -> HTTPRequestMessage? in if case .request(_, let r) = effect { return r }; return nil }
        #expect(requests.map(\.path) == ["/api/workflows", "/api/chats/acme/quick/start"])
        #expect((try? JSONValue.parse(bytes: requests[1].body))?["client_request_id"]?.stringValue?.isEmpty == false)
        let target = try #require(ada.effects.compactMap { effect -> String? in if case .openSocket(let t) = effect { return t }; return nil }.first)
        #expect(target.hasPrefix("/ws/quick/acme/") && target.contains("resume=client") && target.contains("access_token="))
        #expect(ada.effects.contains(.socketSend(ClientMessage.resume(chatID: ada.client.activeChat!.chatID, lastClientIndex: -1).text)))
        #expect(ada.client.isConnected)
        #expect(ada.effects.contains { if case .resumed(0, -1) = $0 { return true }; return false })
    }

    @Test("a turn streams into the timeline in order; the tool call goes to its native renderer; the answer continues the turn")
    func streamAndToolCall() throws {
        var world = Scripts.world()
        var ada = phone(world)
        ada.run(.start(workflow: nil), in: &world)
        ada.run(.submit(text: "hello"), in: &world)
        ada.live(.seconds(2), in: &world)
        #expect(ada.client.messages().map(\.text) == ["hello", "one two three four five six"])
        let prompt = try #require(ada.effects.compactMap { effect -> ToolCallPrompt? in if case .toolCall(let p) = effect { return p }; return nil }.last)
        #expect(prompt.renderer == .native("ActionPlan") && prompt.awaitsResponse && ada.client.activeChat?.awaitingToolCall == prompt.id)
        ada.run(.respond(toolCallID: prompt.id, response: ["text": "yes"]), in: &world)
        ada.live(.seconds(1), in: &world)
        #expect(ada.client.messages().last?.text == "got yes")
        #expect(ada.client.activeChat?.pending.isEmpty == true && ada.client.activeChat?.awaitingToolCall == nil)
        #expect(ada.timeline == world.server.state.transcripts[ada.client.activeChat!.chatID])
        ada.run(.submit(text: "more"), in: &world)
        ada.live(.seconds(1), in: &world)
        let odd = try #require(ada.effects.compactMap { effect -> ToolCallPrompt? in if case .toolCall(let p) = effect { return p }; return nil }.last)
        #expect(odd.renderer == .fallback(component: "HoloDeck"))
        #expect(ada.effects.contains(.runCompleted(summary: "done")) && ada.client.activeChat?.completed == true)
        ada.run(.submit(text: "after the end"), in: &world)
        #expect(ada.effects.last == .surfaced(.runtime("CHAT_COMPLETED")))
    }

    @Test("a drop mid-stream: reconnect after a jittered backoff, resume from the last applied index, no gap, no duplicate")
    func dropMidStream() throws {
        var world = Scripts.world()
        var ada = phone(world)
        ada.run(.start(workflow: nil), in: &world)
        ada.run(.submit(text: "hello"), in: &world)
        ada.live(.milliseconds(350), in: &world)
        let applied = ada.client.activeChat!.lastIndex
        ada.dropSocket(in: &world)
        #expect(!ada.client.isConnected)
        let reconnectAt = try #require(ada.client.nextDeadline)
        #expect(reconnectAt - world.now >= .milliseconds(500) && reconnectAt - world.now <= .milliseconds(1_500))
        ada.live(.seconds(3), in: &world)
        #expect(ada.client.isConnected && ada.client.stats.reconnects == 1)
        #expect(ada.client.stats.replayed > 0 && ada.client.stats.duplicatesIgnored == 0)
        #expect(ada.client.activeChat!.lastIndex > applied)
        let chat = ada.client.activeChat!.chatID
        #expect(ada.timeline == world.server.state.transcripts[chat])
    }

    @Test("backoff doubles to the cap, with jitter, while the runtime cannot be reached")
    func backoffGrows() throws {
        var world = Scripts.world()
        var ada = phone(world)
        ada.run(.start(workflow: nil), in: &world)
        ada.online = false
        ada.dropSocket(in: &world)
        var delays: [TimeSpan] = []
        for _ in 0..<8 {
            let at = try #require(ada.client.nextDeadline)
            delays.append(at - world.now)
            world.advance(to: at)
            ada.pump(in: &world)
        }
        #expect(delays[0] <= .milliseconds(1_500) && delays[1] >= .seconds(1) && delays[2] >= .seconds(2))
        #expect(delays.allSatisfy { $0 <= .seconds(45) } && delays.last! >= .seconds(15))
        ada.online = true
        world.advance(to: ada.client.nextDeadline!)
        ada.pump(in: &world)
        #expect(ada.client.isConnected)
    }

    @Test("inputs made offline wait in the stored queue, go out after the resume, and a re-send after a lost ack is not played twice")
    func pendingQueue() throws {
        var world = Scripts.world()
        var ada = phone(world)
        ada.run(.start(workflow: nil), in: &world)
        ada.online = false
        ada.dropSocket(in: &world)
        ada.run(.submit(text: "written offline"), in: &world)
        #expect(ada.client.activeChat?.pending.count == 1)
        // A relaunch meanwhile: the queue is in the snapshot.
        var relaunched = AgentPhone(app: "acme", user: "ada", token: ada.client.snapshot.token, seed: 1)
        relaunched.client = AgentClient(snapshot: ada.client.snapshot)
        relaunched.online = true
        relaunched.run(.restore, in: &world)
        #expect(relaunched.client.isConnected && relaunched.client.stats.actionsResent == 1)
        #expect(relaunched.client.activeChat?.pending.isEmpty == true)
        // The next input's ack is lost with the socket: the re-send is acknowledged as a duplicate.
        let chat = relaunched.client.activeChat!.chatID
        relaunched.live(.seconds(2), in: &world)
        let prompt = try #require(relaunched.client.activeChat?.awaitingToolCall)
        relaunched.run(.respond(toolCallID: prompt, response: ["text": "ok"]), in: &world)
        relaunched.live(.seconds(1), in: &world)
        let connection = try #require(relaunched.connection)
        relaunched.client = AgentClient(snapshot: relaunched.client.snapshot)  // the app dies before its ack is processed
        world.send(connection, ClientMessage.userInput(chatID: chat, text: "lost ack", context: nil, clientMessageID: "fixed").text)
        world.disconnect(connection)
        relaunched.connection = nil
        relaunched.client.snapshot.chats[relaunched.client.snapshot.activeChat!]!.pending.append(AgentClient.PendingAction(id: "fixed", text: "lost ack", response: nil))
        relaunched.run(.restore, in: &world)
        relaunched.live(.seconds(2), in: &world)
        #expect(world.transcript(chat).filter { $0.data["content"] == "lost ack" }.count == 1)
        #expect(relaunched.client.activeChat?.pending.isEmpty == true)
        #expect(relaunched.timeline == world.server.state.transcripts[chat])
    }

    @Test("a start whose answer is lost is retried with the same client_request_id and gets the same chat")
    func startRetry() throws {
        var world = Scripts.world()
        var ada = phone(world)
        var effects = ada.client.handle(.start(workflow: "quick"), now: world.now)
        guard case .request(let discovery, let listRequest)? = effects.first else { Issue.record("no discovery"); return }
        effects = ada.client.handle(.response(id: discovery, world.http(listRequest)), now: world.now)
        guard case .request(let startID, let startRequest)? = effects.first else { Issue.record("no start"); return }
        let created = world.http(startRequest)  // the runtime made the chat; its answer is lost
        _ = ada.client.handle(.transportFailed(id: startID), now: world.now)
        world.advance(to: ada.client.nextDeadline!)
        ada.run(.timerFired, in: &world)
        #expect(ada.client.activeChat?.chatID == created.jsonBody?["chat_id"]?.stringValue)
        #expect(world.server.state.chats.count == 1 && ada.client.stats.startRetries == 1)
    }

    @Test("runtime errors reach the app as user-safe messages with their codes; a refused token asks for a new one")
    func errorsAndAuth() throws {
        var world = Scripts.world()
        var ada = phone(world)
        ada.run(.start(workflow: nil), in: &world)
        let connection = try #require(ada.connection)
        world.inbox[connection, default: []].append(RuntimeEnvelope(.error, ["message": "Traceback (most recent call last): …", "error_code": "SCHEMA_VALIDATION_FAILED"],
                                                                    timestamp: "").text)
        ada.pump(in: &world)
        let error = try #require(ada.effects.compactMap { effect -> AgentClientError? in if case .surfaced(let e) = effect { return e }; return nil }.last)
        #expect(error.code == "SCHEMA_VALIDATION_FAILED" && !error.message.contains("Traceback"))
        var stranger = AgentPhone(app: "acme", user: "eve", token: "not-a-token", seed: 3)
        stranger.run(.start(workflow: nil), in: &world)
        #expect(stranger.effects.contains { if case .authRequired = $0 { return true }; return false })
        #expect(stranger.client.nextDeadline == nil, "a refused token is not retried in a loop")
    }

    @Test("caches are keyed by app, user and chat: another user on the same phone sees none of them")
    func keyedCaches() throws {
        var world = Scripts.world()
        var ada = phone(world)
        ada.run(.start(workflow: nil), in: &world)
        var snapshot = ada.client.snapshot
        snapshot.userID = "bob"
        snapshot.activeChat = AgentClient.key(app: "acme", user: "bob", chat: ada.client.activeChat!.chatID)
        let bob = AgentClient(snapshot: snapshot)
        #expect(bob.activeChat == nil && ada.client.activeChat != nil)
    }
}
