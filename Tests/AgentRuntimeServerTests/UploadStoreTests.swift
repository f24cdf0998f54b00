import AgentRuntimeServer
import AgentRuntimeWire
import Foundation
import LabKernel
import LabTestSupport
import ServerStorage
import Testing

@Suite("Agent runtime: uploads, the HTTP input fallback, and a restart over SQLite")
struct UploadStoreTests {
    func upload(_ world: inout AgentWorld, token: String, chat: String, user: String = "ada", file: [UInt8], filename: String = "../../etc/passwd",
                extra: [Multipart.Part] = []) -> HTTPResponseMessage {
        let parts = [Multipart.Part(name: "appId", data: Array("acme".utf8)), Multipart.Part(name: "userId", data: Array(user.utf8)),
                     Multipart.Part(name: "chatId", data: Array(chat.utf8)), Multipart.Part(name: "intent", data: Array("receipt".utf8)),
                     Multipart.Part(name: "file", filename: filename, contentType: "text/plain", data: file)] + extra
        let (body, type) = Multipart.encode(parts, boundary: "b0undary")
        return world.http(HTTPRequestMessage(method: "POST", path: "/api/chat/upload", headers: ["authorization": "Bearer \(token)", "content-type": type], body: body))
    }

    @Test("an upload is stored under its id, announced on the socket as chat.attachment_uploaded, and refused past the limit")
    func uploads() throws {
        var world = Fixtures.world { $0.maxUploadBytes = 1_000 }
        let chat = Fixtures.start(&world)
        let socket = try #require(Fixtures.socket(&world, chat: chat))
        _ = world.take(socket)
        let token = world.token(app: "acme", user: "ada")
        let ok = upload(&world, token: token, chat: chat, file: Array("hello file".utf8))
        #expect(ok.status == 200 && ok.jsonBody?["filename"] == "passwd" && ok.jsonBody?["size_bytes"] == 10)
        let event = try #require(world.take(socket).envelopes.first)
        #expect(event.type == .attachmentUploaded && event.index != nil && event.data["intent"] == "receipt")
        let stored = world.committed.compactMap { change -> [UInt8]? in if case .upload(_, let bytes) = change { return bytes }; return nil }
        #expect(stored == [Array("hello file".utf8)])
        let big = upload(&world, token: token, chat: chat, file: [UInt8](repeating: 65, count: 1_001))
        #expect(big.status == 413 && big.jsonBody?["detail"]?.stringValue?.contains("limit") == true)
        let otherUser = upload(&world, token: world.token(app: "acme", user: "bob"), chat: chat, user: "bob", file: [1])
        #expect(otherUser.status == 404)
        let malformed = world.http(HTTPRequestMessage(method: "POST", path: "/api/chat/upload",
                                                      headers: ["authorization": "Bearer \(token)", "content-type": "multipart/form-data; boundary=zz"],
                                                      body: Array("--zz\r\nno headers end".utf8)))
        #expect(malformed.status == 400)
        let notMultipart = world.http("POST", "/api/chat/upload", token: token, json: ["file": "x"])
        #expect(notMultipart.status == 415)
        #expect(world.server.state.uploads.count == 1)
    }

    @Test("the HTTP input route plays a turn like the socket does, and validates its body")
    func httpInput() throws {
        var world = Fixtures.world()
        let chat = Fixtures.start(&world)
        let token = world.token(app: "acme", user: "ada")
        let ok = world.http("POST", "/chat/acme/\(chat)/ada/input", token: token, json: ["message": "Kyoto", "workflow_name": "trip-planner"])
        #expect(ok.status == 200 && ok.jsonBody?["status"] == "accepted" && ok.jsonBody?["transport"] == "http")
        world.advance(by: .seconds(10))
        #expect(world.transcript(chat).contains { $0.type == .toolCall })
        #expect(world.http("POST", "/chat/acme/\(chat)/ada/input", token: token, json: ["workflow_name": "trip-planner"]).status == 422)
        #expect(world.http("POST", "/chat/acme/\(chat)/ada/input", token: token, json: ["message": 3]).status == 422)
        #expect(world.http("POST", "/chat/acme/\(chat)/ada/input", token: token, json: ["message": "x", "workflow_name": "support-triage"]).status == 404)
        let respond = world.http("POST", "/api/tool-call/respond", token: token, json: ["event_id": "nope", "response_data": [:]])
        #expect(respond.status == 404)
        let call = try #require(world.transcript(chat).last { $0.type == .toolCall }?.data["tool_call_id"]?.stringValue)
        #expect(world.http("POST", "/api/tool-call/respond", token: world.token(app: "acme", user: "bob"),
                           json: ["event_id": .string(call), "response_data": ["text": "x"]]).status == 404)
        let answered = world.http("POST", "/api/tool-call/respond", token: token, json: ["event_id": .string(call), "response_data": ["text": "yes"]])
        #expect(answered.jsonBody?["status"] == "accepted")
    }

    @Test("a restart over the SQLite file keeps every chat resumable, a playing turn goes on, and uploads stay on disk")
    func restart() throws {
        let directory = TestPaths.scratchDirectory("agent-store")
        let path = directory.appendingPathComponent("agent-runtime.sqlite").path
        var world = Fixtures.world()
        let chat = Fixtures.start(&world)
        let socket = try #require(Fixtures.socket(&world, chat: chat))
        world.send(socket, ClientMessage.userInput(chatID: chat, text: "Quito", context: nil, clientMessageID: "q").text)
        world.advance(by: .milliseconds(900))
        _ = upload(&world, token: world.token(app: "acme", user: "ada"), chat: chat, file: Array("bytes".utf8))
        let store = try SQLiteAgentServerStore(path: path)
        try store.apply(world.committed)
        let before = world.server.state.transcripts[chat]!
        // A new process: the stored state, a new core, the recovery's wake-ups.
        var restarted = Fixtures.world()
        restarted.server = AgentServer(state: try SQLiteAgentServerStore(path: path).load(), config: world.server.config, seed: StreamSeed(99),
                                       wallClock: .unixEpoch)
        restarted.now = world.now
        restarted.committed = []
        let recovered = restarted.server.recover(now: restarted.now)
        #expect(recovered.wakeups.map(\.chatID) == [chat])
        #expect(restarted.server.state.transcripts[chat] == before)
        #expect(restarted.server.state.chats[chat] == world.server.state.chats[chat])
        let upload = try #require(restarted.server.state.uploads.values.first)
        #expect(FileManager.default.contents(atPath: store.uploadPath(upload.id)) == Data("bytes".utf8))
        let again = try #require(Fixtures.socket(&restarted, chat: chat))
        restarted.send(again, ClientMessage.resume(chatID: chat, lastClientIndex: 1).text)
        #expect(restarted.take(again).envelopes.last?.data["replayed_messages"]?.numberValue == Double(before.count - 2))
    }
}
