import Foundation
import LabKernel
import LabTestSupport
import Live
import Testing

/// The live HTTP client's deadlines: every exchange ends by its own deadline, including on
/// a kept-alive connection whose earlier exchange had a longer or a shorter one.
@Suite("HTTP client: every exchange has its deadline")
struct HTTPClientDeadlineTests {
    static let ok = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"

    func timedOut(_ client: HTTPClient, _ base: String, _ timeout: Duration) async -> (error: HTTPClientError?, seconds: Double) {
        let started = Date()
        do {
            _ = try await client.send(HTTPRequestMessage(method: "GET", path: "/second"), to: base, timeout: timeout)
            return (nil, Date().timeIntervalSince(started))
        } catch {
            return (error as? HTTPClientError, Date().timeIntervalSince(started))
        }
    }

    @Test("a server that takes the request and never answers: timed out at the deadline")
    func silentServer() async throws {
        let listener = try TCPListener()
        let client = HTTPClient()
        defer { client.shutdown() }
        let result = await timedOut(client, "http://127.0.0.1:\(listener.port)", .milliseconds(300))
        #expect(result.error == .timedOut("http://127.0.0.1:\(listener.port)/second"))
        #expect(result.seconds >= 0.25 && result.seconds < 3, "took \(result.seconds) s")
    }

    @Test("on a kept-alive connection the second exchange's deadline holds, shorter or longer than the first's",
          arguments: [(first: 5.0, second: 0.5), (first: 2.0, second: 4.0)])
    func keptAlive(_ deadlines: (first: Double, second: Double)) async throws {
        let listener = try TCPListener()
        listener.answerFirstRequestOnly(Self.ok)
        let client = HTTPClient()
        defer { client.shutdown() }
        let base = "http://127.0.0.1:\(listener.port)"
        let first = try await client.send(HTTPRequestMessage(method: "GET", path: "/first"), to: base, timeout: .seconds(deadlines.first))
        #expect(first.status == 200 && first.body == Array("ok".utf8))
        let second = await timedOut(client, base, .seconds(deadlines.second))
        #expect(second.error == .timedOut(base + "/second"))
        #expect(second.seconds >= deadlines.second - 0.05 && second.seconds < deadlines.second + 1.5, "took \(second.seconds) s")
    }
}
