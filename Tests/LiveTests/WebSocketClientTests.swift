import LabKernel
import LabTestSupport
import Live
import Testing

@Suite("Live clients: a connection that cannot open says why")
struct WebSocketClientTests {
    @Test("a port nothing listens on: unreachable, not a timeout, in the system's words (the upgrade's promise ends with the refusal, which a debug build of NIO checks)")
    func unreachable() async throws {
        let port = try ServedFleetlab.freePort()
        await #expect {
            _ = try await WebSocketClient.connect(host: "127.0.0.1", port: port, target: "/v1/tunnel", timeout: .seconds(5))
        } throws: { error in
            // Not NIO's "connection reset (error set): Connection refused) (errno: 111)".
            guard case WebSocketClientError.unreachable(let what)? = error as? WebSocketClientError else { return false }
            return what == "127.0.0.1:\(port): Connection refused"
        }
    }

    @Test("an HTTP request to a port nothing listens on, and to a name that does not resolve, says why in the system's words")
    func httpUnreachable() async throws {
        let port = try ServedFleetlab.freePort()
        let http = HTTPClient()
        defer { http.shutdown() }
        let request = HTTPRequestMessage(method: "GET", target: "/health")
        await #expect(throws: HTTPClientError.unreachable("127.0.0.1:\(port): Connection refused")) {
            _ = try await http.send(request, to: "http://127.0.0.1:\(port)", timeout: .seconds(5))
        }
        // `.invalid` never resolves (RFC 6761); offline, the resolver's reason differs.
        await #expect {
            _ = try await http.send(request, to: "http://fleetlab-test.invalid:\(port)", timeout: .seconds(5))
        } throws: { error in
            guard case .unreachable(let what)? = error as? HTTPClientError else { return false }
            return what.hasPrefix("fleetlab-test.invalid:\(port): ") && !what.contains("SocketAddressError") && !what.contains("errno")
        }
    }
}
