import AgentRuntimeServer
import AgentRuntimeWire
import LabKernel
import LabTestSupport
import Testing

@Suite("Agent runtime: the socket, streamed turns, tool calls and resume")
struct SocketRunTests {
    /// Indexes of the transcript events among `frames`.
    func indexes(_ frames: [String]) -> [Int] { frames.envelopes.compactMap(\.index) }

    @Test("chat_meta first; an input is acknowledged, stored, and answered in chunks at the script's pace with contiguous indexes")
    func streamedTurn() throws {
        var world = Fixtures.world()
        let chat = Fixtures.start(&world)
        let socket = try #require(Fixtures.socket(&world, chat: chat))
        let first = world.take(socket).envelopes
        #expect(first.map(\.type) == [.chatMeta] && first[0].data["chat_id"]?.stringValue == chat && first[0].data["total_messages"] == 2)
        world.send(socket, ClientMessage.userInput(chatID: chat, text: "Lisbon in May", context: nil, clientMessageID: "m1").text)
        let immediate = world.take(socket).envelopes
        #expect(immediate.map(\.type) == [.text, .inputAck])
        #expect(immediate[0].data["role"] == "user" && immediate[0].index == 2 && immediate[1].data["client_message_id"] == "m1")
        // The script thinks for 700 ms before its first chunk.
        world.advance(by: .milliseconds(699))
        #expect(world.take(socket).isEmpty)
        world.advance(by: .milliseconds(1))
        let chunk = try #require(world.take(socket).envelopes.first)
        #expect(chunk.type == .text && chunk.data["content"] == "Great choice. Let " && chunk.data["chunk"] == 0 && chunk.data["final"] == false)
        world.advance(by: .seconds(10))
        let rest = world.take(socket).envelopes
        let texts = ([chunk] + rest).filter { $0.type == .text && $0.data["message_id"] == chunk.data["message_id"] }
        #expect(texts.compactMap { $0.data["content"]?.stringValue }.joined() == "Great choice. Let me look at options for Lisbon in May.")
        #expect(texts.last?.data["final"] == true)
        let call = try #require(rest.first { $0.type == .toolCall })
        #expect(call.data["component_type"] == "ActionPlan" && call.data["awaiting_response"] == true && call.data["interaction_type"] == "input_request")
        #expect(rest.last?.type == .toolCall, "the turn waits for the tool call's response")
        #expect(indexes(world.server.state.transcripts[chat]!) == Array(0..<world.server.state.transcripts[chat]!.count))
        let id = try #require(call.data["tool_call_id"]?.stringValue)
        world.send(socket, ClientMessage.toolCallResponse(toolCallID: id, response: ["text": "approved"]).text)
        let after = world.take(socket).envelopes
        #expect(after.map(\.type).prefix(2) == [.toolResponse, .ackToolCallResponse] || after.map(\.type).contains(.ackToolCallResponse))
        world.advance(by: .seconds(5))
        let ending = after + world.take(socket).envelopes
        #expect(ending.filter { $0.type == .text }.compactMap { $0.data["content"]?.stringValue }.joined() == "Noted: approved. I am booking it now.")
        #expect(ending.last?.type == .inputRequest)
        // The same response again is a duplicate; a different one is refused; nothing is stored twice.
        let count = world.server.state.transcripts[chat]!.count
        world.send(socket, ClientMessage.toolCallResponse(toolCallID: id, response: ["text": "approved"]).text)
        #expect(world.take(socket).envelopes.map { $0.data["status"] } == ["duplicate"])
        world.send(socket, ClientMessage.toolCallResponse(toolCallID: id, response: ["text": "no"]).text)
        #expect(world.take(socket).envelopes.first?.data["error_code"] == "TOOL_CALL_NOT_AWAITING")
        #expect(world.server.state.transcripts[chat]!.count == count)
    }

    @Test("a composer tool call is answered by the next input; the last turn completes the chat, which then refuses input")
    func composerAndCompletion() throws {
        var world = Fixtures.world()
        let chat = Fixtures.start(&world)
        let socket = try #require(Fixtures.socket(&world, chat: chat))
        world.send(socket, ClientMessage.userInput(chatID: chat, text: "Rome", context: nil, clientMessageID: nil).text)
        world.advance(by: .seconds(10))
        let call = try #require(world.take(socket).envelopes.last { $0.type == .toolCall })
        world.send(socket, ClientMessage.toolCallResponse(toolCallID: call.data["tool_call_id"]!.stringValue!, response: ["text": "ok"]).text)
        world.advance(by: .seconds(5))
        world.send(socket, ClientMessage.userInput(chatID: chat, text: "next", context: nil, clientMessageID: nil).text)
        world.advance(by: .seconds(5))
        let composer = try #require(world.take(socket).envelopes.last { $0.type == .toolCall })
        #expect(composer.data["display"] == "composer" && composer.data["component_type"] == "TextInput")
        world.send(socket, ClientMessage.userInput(chatID: chat, text: "a window seat", context: nil, clientMessageID: nil).text)
        world.advance(by: .seconds(5))
        let end = world.take(socket).envelopes
        #expect(end.contains { $0.type == .toolResponse && $0.data["result"]?["text"] == "a window seat" })
        #expect(end.suffix(2).map(\.type) == [.usageSummary, .runComplete])
        #expect(end.last?.data["summary"] == "Trip booked" && world.server.state.chats[chat]?.completed == true)
        world.send(socket, ClientMessage.userInput(chatID: chat, text: "more", context: nil, clientMessageID: nil).text)
        #expect(world.take(socket).envelopes.map { $0.data["error_code"] } == ["CHAT_COMPLETED"])
    }

    @Test("a socket that drops mid-stream misses nothing: the run goes on, and client.resume replays exactly the rest, then the boundary")
    func resumeAfterDrop() throws {
        var world = Fixtures.world()
        let chat = Fixtures.start(&world)
        var socket = try #require(Fixtures.socket(&world, chat: chat))
        world.send(socket, ClientMessage.userInput(chatID: chat, text: "Oslo", context: nil, clientMessageID: "a").text)
        world.advance(by: .milliseconds(800))
        let seen = world.take(socket).envelopes.compactMap(\.index)
        let last = try #require(seen.max())
        world.disconnect(socket)
        world.advance(by: .seconds(10))
        let total = world.server.state.transcripts[chat]!.count
        #expect(total > last + 5, "the run went on while nobody listened")
        socket = try #require(Fixtures.socket(&world, chat: chat))
        #expect(world.take(socket).envelopes.map(\.type) == [.chatMeta])
        world.send(socket, ClientMessage.resume(chatID: chat, lastClientIndex: last).text)
        let replay = world.take(socket).envelopes
        #expect(replay.dropLast().compactMap(\.index) == Array((last + 1)..<total))
        #expect(replay.dropLast().allSatisfy { $0.data["replay"] == true })
        #expect(replay.dropLast().map(\.canonical.text) == Array(world.server.state.transcripts[chat]![(last + 1)...]))
        let boundary = try #require(replay.last)
        #expect(boundary.type == .resumeBoundary && boundary.index == nil)
        #expect(boundary.data["replayed_messages"]?.numberValue == Double(total - last - 1))
        #expect(boundary.data["last_message_index"]?.numberValue == Double(total - 1) && boundary.data["total_messages"]?.numberValue == Double(total))
        #expect(boundary.data["resume_state"] == "in_sync" && boundary.data["awaiting_tool_call"] != .null)
        // Nothing to replay: zero, and the index the client gave.
        world.send(socket, ClientMessage.resume(chatID: chat, lastClientIndex: total - 1).text)
        #expect(world.take(socket).envelopes.map { $0.data["replayed_messages"] } == [0])
        // A client that claims more than was ever sent is told it diverged.
        world.send(socket, ClientMessage.resume(chatID: chat, lastClientIndex: total + 40).text)
        #expect(world.take(socket).envelopes.first?.data["resume_state"] == "diverged")
    }

    @Test("without resume=client the runtime replays the transcript on connect (resume_mode auto), as Mozaiks does")
    func autoReplay() throws {
        var world = Fixtures.world()
        let chat = Fixtures.start(&world)
        let socket = try #require(Fixtures.socket(&world, chat: chat, resumesItself: false))
        let frames = world.take(socket).envelopes
        #expect(frames.map(\.type) == [.chatMeta, .text, .inputRequest, .resumeBoundary])
        #expect(frames.last?.data["resume_mode"] == "auto" && frames[1].data["replay"] == true)
    }

    @Test("an AgentDriven workflow speaks first when its chat's first socket opens, and only then")
    func agentDriven() throws {
        var world = Fixtures.world()
        let chat = Fixtures.start(&world, workflow: "support-triage")
        #expect(world.server.state.transcripts[chat]!.isEmpty)
        let socket = try #require(Fixtures.socket(&world, chat: chat, workflow: "support-triage"))
        world.advance(by: .seconds(3))
        let frames = world.take(socket).envelopes
        #expect(frames.filter { $0.type == .text }.compactMap { $0.data["content"]?.stringValue }.joined() == "Hi, I am the support assistant. What went wrong?")
        #expect(frames.last?.type == .inputRequest)
        world.disconnect(socket)
        let again = try #require(Fixtures.socket(&world, chat: chat, workflow: "support-triage"))
        world.advance(by: .seconds(3))
        #expect(world.take(again).envelopes.map(\.type) == [.chatMeta])
    }

    @Test("every socket of a chat hears its events; a re-sent input (same client_message_id) is acknowledged and not played twice")
    func fanOutAndDedup() throws {
        var world = Fixtures.world()
        let chat = Fixtures.start(&world)
        let phone = try #require(Fixtures.socket(&world, chat: chat)), tablet = try #require(Fixtures.socket(&world, chat: chat))
        _ = world.take(phone); _ = world.take(tablet)
        let input = ClientMessage.userInput(chatID: chat, text: "Paris", context: nil, clientMessageID: "same").text
        world.send(phone, input)
        world.send(phone, input)
        #expect(world.take(phone).envelopes.compactMap { $0.data["status"]?.stringValue } == ["accepted", "duplicate"])
        #expect(world.take(tablet).envelopes.map(\.type) == [.text])
        world.advance(by: .seconds(10))
        #expect(world.take(phone) == world.take(tablet))
        #expect(world.transcript(chat).filter { $0.data["role"] == "user" }.count == 1)
    }

    @Test("malformed frames get chat.error with a code, change nothing, and the socket stays open")
    func malformedFrames() throws {
        var world = Fixtures.world()
        let chat = Fixtures.start(&world)
        let socket = try #require(Fixtures.socket(&world, chat: chat))
        _ = world.take(socket)
        let before = world.server.state.transcripts[chat]!
        let cases: [(String, String)] = [
            ("not json", "SCHEMA_VALIDATION_FAILED"), ("[1,2]", "SCHEMA_VALIDATION_FAILED"), (#"{"text":"no type"}"#, "SCHEMA_VALIDATION_FAILED"),
            (#"{"type":"user.input.submit"}"#, "SCHEMA_VALIDATION_FAILED"), (#"{"type":"user.input.submit","text":"   "}"#, "EMPTY_MESSAGE"),
            (#"{"type":"user.input.submit","text":5}"#, "SCHEMA_VALIDATION_FAILED"),
            (#"{"type":"user.input.submit","text":"hi","chat_id":"another"}"#, "CHAT_MISMATCH"),
            (#"{"type":"client.resume","lastClientIndex":"3"}"#, "SCHEMA_VALIDATION_FAILED"),
            (#"{"type":"client.resume","lastClientIndex":1.5}"#, "SCHEMA_VALIDATION_FAILED"),
            (#"{"type":"tool_call_response","tool_call_id":"nope","response":{}}"#, "TOOL_CALL_NOT_FOUND"),
            (#"{"type":"tool_call_response","tool_call_id":"x","response":"yes"}"#, "SCHEMA_VALIDATION_FAILED"),
            (#"{"type":"chat.start_workflow","workflow_name":"nope"}"#, "START_WORKFLOW_FAILED"),
            (#"{"type":"chat.start_workflow_batch","runs":[]}"#, "SCHEMA_VALIDATION_FAILED"),
            (#"{"type":"something.else"}"#, "UNKNOWN_MESSAGE_TYPE"),
            ("{\"type\":\"user.input.submit\",\"text\":\"" + String(repeating: "x", count: 40_000) + "\"}", "MESSAGE_TOO_LARGE"),
        ]
        for (frame, code) in cases {
            world.send(socket, frame)
            let reply = world.take(socket).envelopes
            #expect(reply.count == 1 && reply.first?.type == .error && reply.first?.data["error_code"]?.stringValue == code, "\(frame.prefix(60))")
        }
        #expect(world.server.state.transcripts[chat]! == before)
        #expect(world.server.state.chats.count == 1)
        world.send(socket, ClientMessage.userInput(chatID: chat, text: "still here", context: nil, clientMessageID: nil).text)
        #expect(world.take(socket).envelopes.last?.type == .inputAck)
    }

    @Test("mode and workflow control messages: general mode, a general chat, a workflow, a batch with the unknown ones blocked")
    func controlMessages() throws {
        var world = Fixtures.world()
        let chat = Fixtures.start(&world)
        let socket = try #require(Fixtures.socket(&world, chat: chat))
        _ = world.take(socket)
        world.send(socket, ClientMessage.enterGeneralMode.text)
        #expect(world.take(socket).envelopes.first?.data["mode"] == "general")
        world.send(socket, ClientMessage.startGeneralChat.text)
        let general = try #require(world.take(socket).envelopes.first)
        #expect(general.type == .generalSessionCreated && world.server.state.chats[general.data["chat_id"]!.stringValue!]?.workflow == "general")
        world.send(socket, ClientMessage.startWorkflow(workflow: "support-triage", initialMessage: "my order is late").text)
        let started = try #require(world.take(socket).envelopes.first)
        let newChat = try #require(started.data["chat_id"]?.stringValue)
        #expect(started.type == .workflowStarted && world.transcript(newChat).first?.data["content"] == "my order is late")
        world.send(socket, ClientMessage.startWorkflowBatch([.init(workflow: "trip-planner", label: "a"), .init(workflow: "missing")]).text)
        let batch = try #require(world.take(socket).envelopes.first)
        #expect(batch.data["count"] == 1 && batch.data["blocked"] == ["missing"])
        world.send(socket, ClientMessage.switchWorkflow(chatID: newChat, workflow: nil).text)
        #expect(world.take(socket).envelopes.first?.type == .contextSwitched)
    }
}
