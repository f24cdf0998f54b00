import DesktopBridgeClient
import DesktopBridgeServer
import DesktopBridgeWire
import LabKernel
import LabTestSupport
import Testing

/// Random and mutated frames against the desktop core and the phone core, a bounded
/// number from a fixed seed (a failure names the frame): nothing crashes or hangs, and
/// every answer the desktop gives is a well-formed JSON-RPC response.
@Suite("Desktop bridge: fuzzed frames")
struct DesktopFuzzTests {
    static let seeds: [String] = [
        #"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}"#,
        #"{"jsonrpc":"2.0","id":"2","method":"initialize","params":{"protocol_version":"0.2.2"}}"#,
        #"{"jsonrpc":"2.0","id":3,"method":"session/new","params":{"cwd":"/workspace","mcpServers":[]}}"#,
        #"{"jsonrpc":"2.0","id":4,"method":"session/prompt","params":{"sessionId":"sess_x","prompt":[{"type":"text","text":"hi"}]}}"#,
        #"{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"sess_x"}}"#,
        #"[{"jsonrpc":"2.0","id":5,"method":"tinyvex/history.recentSessions"},{"jsonrpc":"2.0","method":"x"}]"#,
        #"{"jsonrpc":"2.0","id":6,"method":"fs/read_text_file","params":{"sessionId":"s","path":"../a","line":1,"limit":2}}"#,
        #"{"jsonrpc":"2.0","id":7,"method":"tinyvex/history.sessionTimeline","params":{"session_id":"s","limit":3}}"#,
        #"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"plan","entries":[]},"_meta":{"seq":2}}}"#,
    ]
    static let alphabet = Array(#"{}[]":,0123456789.-eE truefalsenull\"jsonrpcidmethodparams"#.utf8)

    static func mutate(_ text: String, _ g: inout SeededGenerator) -> String {
        var bytes = Array(text.utf8)
        switch g.next(below: 6) {
        case 0: return String(decoding: (0..<Int(g.next(below: 64))).map { _ in UInt8(truncatingIfNeeded: g.next()) }, as: UTF8.self)
        case 1: bytes = Array(bytes.prefix(Int(g.next(below: UInt64(bytes.count + 1)))))
        case 2:
            for _ in 0..<(1 + Int(g.next(below: 4))) where !bytes.isEmpty {
                bytes[Int(g.next(below: UInt64(bytes.count)))] = alphabet[Int(g.next(below: UInt64(alphabet.count)))]
            }
        case 3:
            let at = Int(g.next(below: UInt64(bytes.count + 1)))
            bytes.insert(contentsOf: Array(seeds[Int(g.next(below: UInt64(seeds.count)))].utf8), at: at)
        case 4: return "[" + Array(repeating: text, count: 1 + Int(g.next(below: 3))).joined(separator: ",") + "]"
        default: return String(repeating: "[", count: Int(g.next(below: 2_000))) + text
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// A response is `{jsonrpc, id, result}` or `{jsonrpc, id, error: {code, message}}`.
    static func wellFormed(_ value: JSONValue) -> Bool {
        guard value["jsonrpc"] == "2.0" else { return false }
        if value["method"] == "session/update" { return value["id"] == nil }
        guard value["id"] != nil else { return false }
        switch (value["result"], value["error"]) {
        case (_?, nil): return true
        case (nil, let error?): return error["code"]?.numberValue != nil && error["message"]?.stringValue != nil
        default: return false
        }
    }

    @Test("20,000 random and mutated frames: the desktop answers each with well-formed JSON-RPC or stays silent, and the phone core never trips")
    func frames() async throws {
        let failures = try await offPool { () -> [String] in
            var g = StreamSeed(77).generator()
            var bridge = DesktopBridge(seed: StreamSeed(1), wallClock: .unixEpoch)
            var connection = bridge.connect()
            var client = DesktopClient(config: .init(dialect: .current), seed: StreamSeed(2))
            let now = Instant(nanoseconds: 1_800_000_000_000_000_000)
            _ = client.handle(.connect, now: now)
            _ = client.handle(.socketOpened, now: now)
            var failures: [String] = []
            for round in 0..<20_000 {
                if round % 500 == 0 {
                    bridge.disconnect(connection)
                    connection = bridge.connect()
                }
                let frame = Self.mutate(Self.seeds[Int(g.next(below: UInt64(Self.seeds.count)))], &g)
                let reply = bridge.receive(connection, text: frame, now: now + .milliseconds(Int64(round)))
                for case .send(_, let text) in reply.outputs {
                    guard let value = try? JSONValue.parse(text) else {
                        failures.append("not JSON for \(frame.prefix(80)): \(text.prefix(80))")
                        continue
                    }
                    let items = value.arrayValue ?? [value]
                    if items.isEmpty || !items.allSatisfy(Self.wellFormed) { failures.append("malformed for \(frame.prefix(80)): \(text.prefix(120))") }
                }
                _ = client.handle(.socketText(frame), now: now + .milliseconds(Int64(round)))
                if failures.count > 5 { break }
            }
            _ = bridge.expire(now: now + .seconds(3_600))
            return failures
        }
        #expect(failures.isEmpty, "\(failures)")
    }
}
