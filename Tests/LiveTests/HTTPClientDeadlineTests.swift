import Foundation
import LabKernel
import LabTestSupport
import Live
import NIOCore
import NIOPosix
import Testing

/// The live HTTP client's deadlines: every exchange ends by its own deadline, including on
/// a kept-alive connection whose earlier exchange had a longer or a shorter one.
///
/// The client runs on an event loop of its own: the suite's in-process servers share the
/// singleton loops with their handlers' work (password hashing, SQLite), which can hold a
/// timer there for seconds. Bounds are one-sided where a loaded machine could only make
/// a run slower: an exchange must not end before its deadline, and must end long before a
/// deadline it must not be confused with.
@Suite("HTTP client: every exchange has its deadline")
struct HTTPClientDeadlineTests {
    static let ok = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"

    /// Runs `body` with a client on a loop of its own, then shuts both down.
    func withClient(_ body: (HTTPClient) async throws -> Void) async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let client = HTTPClient(group: group)
        do {
            try await body(client)
        } catch {
            client.shutdown()
            try await group.shutdownGracefully()
            throw error
        }
        client.shutdown()
        try await group.shutdownGracefully()
    }

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
        try await withClient { client in
            let result = await timedOut(client, "http://127.0.0.1:\(listener.port)", .milliseconds(300))
            #expect(result.error == .timedOut("http://127.0.0.1:\(listener.port)/second"))
            #expect(result.seconds >= 0.25 && result.seconds < 20, "took \(result.seconds) s")
        }
        // Listening to the end: a listener released after its last use closes its socket.
        withExtendedLifetime(listener) {}
    }

    @Test("on a kept-alive connection the second exchange's deadline holds, shorter or longer than the first's",
          arguments: [(first: 30.0, second: 0.5, within: 15.0), (first: 8.0, second: 12.0, within: 60.0)])
    func keptAlive(_ deadlines: (first: Double, second: Double, within: Double)) async throws {
        let listener = try TCPListener()
        listener.answerFirstRequestOnly(Self.ok)
        try await withClient { client in
            let base = "http://127.0.0.1:\(listener.port)"
            let first = try await client.send(HTTPRequestMessage(method: "GET", path: "/first"), to: base, timeout: .seconds(deadlines.first))
            #expect(first.status == 200 && first.body == Array("ok".utf8))
            let second = await timedOut(client, base, .seconds(deadlines.second))
            #expect(second.error == .timedOut(base + "/second"))
            // Not at the first exchange's deadline: not before its own, and (a short one)
            // long before the first's 30 s.
            #expect(second.seconds >= deadlines.second - 0.05 && second.seconds < deadlines.within, "took \(second.seconds) s")
        }
    }
}
