import LabTestSupport
import Live
import Testing

@Suite("WebSocket client: a socket that cannot open says why")
struct WebSocketClientTests {
    @Test("a port nothing listens on: unreachable, not a timeout (the upgrade's promise ends with the refusal, which a debug build of NIO checks)")
    func unreachable() async throws {
        let port = try ServedFleetlab.freePort()
        await #expect {
            _ = try await WebSocketClient.connect(host: "127.0.0.1", port: port, target: "/v1/tunnel", timeout: .seconds(5))
        } throws: { error in
            guard case WebSocketClientError.unreachable(let what)? = error as? WebSocketClientError else { return false }
            return what.hasPrefix("127.0.0.1:\(port)")
        }
    }
}
