import DesktopBridgeServer
import DesktopBridgeWire
import LabKernel
import Testing

/// The strict JSON-RPC 2.0 suite: what the original desktop got wrong (no answer to an
/// unknown method, notifications answered, batches not understood) answered as the
/// specification says, against the desktop core.
@Suite("Desktop bridge: strict JSON-RPC 2.0")
struct JSONRPCEdgeCaseTests {
    static let now = Instant(nanoseconds: 1_800_000_000_000_000_000)

    /// A desktop and one connection; `send` returns what came back on it, parsed.
    struct Desk {
        var bridge = DesktopBridge(seed: StreamSeed(1), wallClock: .unixEpoch)
        let connection: Int

        init() { connection = bridge.connect() }

        mutating func send(_ text: String) -> [JSONValue] {
            bridge.receive(connection, text: text, now: JSONRPCEdgeCaseTests.now).outputs.compactMap {
                guard case .send(let to, let text) = $0, to == connection else { return nil }
                return try? JSONValue.parse(text)
            }
        }

        mutating func initialize(legacy: Bool = false) {
            let params = legacy ? #"{"protocol_version":"0.2.2","client_capabilities":{}}"# : #"{"protocolVersion":1,"clientCapabilities":{}}"#
            let answer = send(#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":\#(params)}"#)
            precondition(answer.first?["result"] != nil)
        }
    }

    static func code(_ value: JSONValue?) -> Int? { value?["error"]?["code"]?.numberValue.map { Int($0) } }

    @Test("a frame that is not JSON is -32700 with id null; a non-object is -32600")
    func parseErrors() {
        var desk = Desk()
        for text in ["{", "not json", #"{"jsonrpc":"2.0","method":"x","id":1"#, "\u{0}"] {
            let answer = desk.send(text)
            #expect(answer.count == 1 && Self.code(answer.first) == -32700 && answer.first?["id"] == .null, "\(text)")
        }
        for text in ["1", #""initialize""#, "null", "true"] {
            #expect(Self.code(desk.send(text).first) == -32600, "\(text)")
        }
    }

    @Test("invalid requests: missing or wrong jsonrpc, a method that is not a string, params that are not structured, an id of the wrong type")
    func invalidRequests() {
        var desk = Desk()
        let cases: [(String, JSONValue)] = [
            (#"{"id":7,"method":"initialize"}"#, 7),
            (#"{"jsonrpc":"1.0","id":"a","method":"initialize"}"#, "a"),
            (#"{"jsonrpc":"2.0","id":8,"method":5}"#, 8),
            (#"{"jsonrpc":"2.0","id":9,"method":""}"#, 9),
            (#"{"jsonrpc":"2.0","id":10,"method":"initialize","params":"x"}"#, 10),
            (#"{"jsonrpc":"2.0","id":{"a":1},"method":"initialize"}"#, .null),
            (#"{"jsonrpc":"2.0","id":[1],"method":"initialize"}"#, .null),
            (#"{"jsonrpc":"2.0","id":11}"#, 11),
        ]
        for (text, id) in cases {
            let answer = desk.send(text)
            #expect(answer.count == 1 && Self.code(answer.first) == -32600 && answer.first?["id"] == id, "\(text) → \(answer)")
            #expect(answer.first?["jsonrpc"] == "2.0")
        }
    }

    @Test("before initialize only initialize is served; notifications are never answered")
    func beforeInitialize() {
        var desk = Desk()
        let answer = desk.send(#"{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/workspace"}}"#)
        #expect(Self.code(answer.first) == RPCError.notInitializedCode)
        #expect(desk.send(#"{"jsonrpc":"2.0","method":"session/new","params":{}}"#).isEmpty)
        #expect(desk.send(#"{"jsonrpc":"2.0","method":"no/such/thing"}"#).isEmpty)
        desk.initialize()
        #expect(desk.send(#"{"jsonrpc":"2.0","method":"no/such/thing"}"#).isEmpty, "a notification of an unknown method: silence")
        #expect(desk.send(#"{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"nope"}}"#).isEmpty)
    }

    @Test("an unknown method is -32601 naming it; bad params are -32602 naming the field")
    func unknownMethodAndParams() {
        var desk = Desk()
        desk.initialize()
        let unknown = desk.send(#"{"jsonrpc":"2.0","id":2,"method":"session/teleport","params":{}}"#)
        #expect(Self.code(unknown.first) == -32601 && unknown.first?["error"]?["data"]?["method"] == "session/teleport")
        let noCwd = desk.send(#"{"jsonrpc":"2.0","id":3,"method":"session/new","params":{}}"#)
        #expect(Self.code(noCwd.first) == -32602 && noCwd.first?["error"]?["data"]?["field"] == "cwd")
        let wrongType = desk.send(#"{"jsonrpc":"2.0","id":4,"method":"session/prompt","params":{"sessionId":5,"prompt":[]}}"#)
        #expect(Self.code(wrongType.first) == -32602 && wrongType.first?["error"]?["data"]?["field"] == "sessionId")
        let arrayParams = desk.send(#"{"jsonrpc":"2.0","id":5,"method":"session/new","params":["/workspace"]}"#)
        #expect(Self.code(arrayParams.first) == -32602)
        let missing = desk.send(#"{"jsonrpc":"2.0","id":6,"method":"session/prompt","params":{"sessionId":"sess_nope","prompt":[{"type":"text","text":"hi"}]}}"#)
        #expect(Self.code(missing.first) == RPCError.resourceNotFoundCode)
    }

    @Test("string and number ids are echoed as sent, null too")
    func ids() {
        var desk = Desk()
        let string = desk.send(#"{"jsonrpc":"2.0","id":"1","method":"initialize","params":{"protocolVersion":1}}"#)
        #expect(string.first?["id"] == "1" && string.first?["result"] != nil)
        let text = desk.bridge.receive(desk.connection, text: #"{"jsonrpc":"2.0","id":42,"method":"tinyvex/history.recentSessions"}"#, now: Self.now).outputs
        guard case .send(_, let raw)? = text.first else { Issue.record("no answer"); return }
        #expect(raw.contains(#""id":42"#) && !raw.contains(#""id":"42""#) && !raw.contains("42.0"))
        #expect(desk.send(#"{"jsonrpc":"2.0","id":-3.5,"method":"tinyvex/history.recentSessions"}"#).first?["id"] == -3.5)
        #expect(desk.send(#"{"jsonrpc":"2.0","id":null,"method":"tinyvex/history.recentSessions"}"#).first?["id"] == .null)
    }

    @Test("batches: answered as one array in order, notifications left out, an empty batch is one -32600, all-notification batches get nothing")
    func batches() {
        var desk = Desk()
        desk.initialize()
        let empty = desk.send("[]")
        #expect(empty.count == 1 && empty.first?.arrayValue == nil && Self.code(empty.first) == -32600)
        let mixed = desk.send("""
            [{"jsonrpc":"2.0","id":"a","method":"tinyvex/history.recentSessions"},
             {"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"x"}},
             1,
             {"jsonrpc":"2.0","id":"b","method":"nope"},
             {"jsonrpc":"2.0","id":"c","method":"session/new","params":{"cwd":"/workspace"}}]
            """)
        // The new session's mode update goes out as a notification beside the batch's answer.
        #expect(mixed.filter { $0.arrayValue != nil }.count == 1 && mixed.filter { $0["method"] == "session/update" }.count == 1)
        let items = mixed.first { $0.arrayValue != nil }?.arrayValue ?? []
        #expect(items.count == 4, "four answers: three requests and the invalid element")
        #expect(items.map { $0["id"] } == ["a", .null, "b", "c"])
        guard items.count == 4 else { return }
        #expect(items[0]["result"]?.arrayValue != nil && Self.code(items[1]) == -32600 && Self.code(items[2]) == -32601)
        #expect(items[3]["result"]?["sessionId"]?.stringValue?.hasPrefix("sess_") == true)
        #expect(desk.send(#"[{"jsonrpc":"2.0","method":"a"},{"jsonrpc":"2.0","method":"b"}]"#).isEmpty)
        let tooMany = "[" + Array(repeating: #"{"jsonrpc":"2.0","method":"a"}"#, count: RPCFrame.maxBatch + 1).joined(separator: ",") + "]"
        #expect(Self.code(desk.send(tooMany).first) == -32600)
    }

    @Test("a stray response from a phone is dropped, not answered")
    func strayResponses() {
        var desk = Desk()
        desk.initialize()
        #expect(desk.send(#"{"jsonrpc":"2.0","id":5,"result":{}}"#).isEmpty)
        #expect(desk.send(#"{"jsonrpc":"2.0","id":5,"error":{"code":-1,"message":"x"}}"#).isEmpty)
        #expect(Self.code(desk.send(#"{"jsonrpc":"2.0","id":5,"result":{},"error":{"code":1,"message":"x"}}"#).first) == -32600)
    }

    @Test("initialize picks the dialect and keeps it: the other dialect on the same connection is refused")
    func dialectIsFixed() {
        var desk = Desk()
        let legacy = desk.send(#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocol_version":"0.2.2"}}"#)
        #expect(legacy.first?["result"]?["protocol_version"] == "0.2.2" && legacy.first?["result"]?["agent_info"]?["name"] != nil)
        #expect(legacy.first?["result"]?["_meta"]?["working_directory"] == "/workspace")
        let again = desk.send(#"{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocol_version":"0.2.2"}}"#)
        #expect(again.first?["result"] != nil)
        let other = desk.send(#"{"jsonrpc":"2.0","id":3,"method":"initialize","params":{"protocolVersion":1}}"#)
        #expect(Self.code(other.first) == -32602)
        var fresh = Desk()
        #expect(Self.code(fresh.send(#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#).first) == -32602)
        #expect(Self.code(fresh.send(#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"1"}}"#).first) == -32602)
        let current = fresh.send(#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}"#)
        #expect(current.first?["result"]?["protocolVersion"] == 1 && current.first?["result"]?["agentCapabilities"]?["promptCapabilities"] != nil)
    }
}
