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
/// The client runs on an event loop of its own (`withLoopClient`): the suite's in-process servers share the
/// singleton loops with their handlers' work (password hashing, SQLite), which can hold a
/// timer there for seconds. The exchanges run there too, as a load test's phones do: a
/// task on Swift's cooperative pool resumes only when a thread of it is free, and other
/// suites' tests that wait for a `fleetlab` process hold both of this machine's for
/// seconds (an exchange that timed out at 300 ms was seen to resume after 25 s). Bounds
/// are one-sided where a loaded machine could only make a run slower: an exchange must
/// not end before its deadline, and must end long before a deadline it must not be
/// confused with.
@Suite("HTTP client: every exchange has its deadline")
struct HTTPClientDeadlineTests {
    static let ok = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"

    @Test("a server that takes the request and never answers: timed out at the deadline")
    func silentServer() async throws {
        let listener = try TCPListener()
        try await withLoopClient { client in
            let result = await exchange(client, "http://127.0.0.1:\(listener.port)", "/second", .milliseconds(300))
            // Timed out while connecting or while waiting for the answer: either is the deadline.
            guard case .timedOut = result.error else { Issue.record("expected a timeout, got \(String(describing: result.error))"); return }
            #expect(result.seconds >= 0.25 && result.seconds < 20, "took \(result.seconds) s")
        }
        // Listening to the end: a listener released after its last use closes its socket.
        withExtendedLifetime(listener) {}
    }

    /// Sends GET `path` and returns its answer, or how it failed and after how long.
    func exchange(_ client: HTTPClient, _ base: String, _ path: String, _ timeout: Duration) async -> (status: Int?, error: HTTPClientError?, seconds: Double) {
        let started = Date()
        do {
            let answer = try await client.send(HTTPRequestMessage(method: "GET", path: path), to: base, timeout: timeout)
            return (answer.status, nil, Date().timeIntervalSince(started))
        } catch {
            return (nil, error as? HTTPClientError, Date().timeIntervalSince(started))
        }
    }

    /// Runs `body` on a kept-alive connection to a server that answers its first `answered`
    /// requests, after the first of them: the connection's timer is armed for that
    /// exchange's deadline (60 s, generous: under a loaded suite, connecting can wait for
    /// a thread of the cooperative pool).
    func onWarmConnection(answering answered: Int, _ body: (HTTPClient, String) async throws -> Void) async throws {
        let listener = try TCPListener()
        listener.answerFirstRequests(answered, with: Self.ok)
        try await withLoopClient { client in
            let base = "http://127.0.0.1:\(listener.port)"
            #expect(await exchange(client, base, "/first", .seconds(60)).status == 200)
            try await body(client, base)
        }
    }

    @Test("on a kept-alive connection an exchange's deadline holds when it is shorter than the one the timer was armed for")
    func shorterDeadline() async throws {
        try await onWarmConnection(answering: 1) { client, base in
            let silent = await exchange(client, base, "/second", .milliseconds(500))
            #expect(silent.error == .timedOut(base + "/second"))
            #expect(silent.seconds >= 0.45 && silent.seconds < 30, "at its own deadline, long before the first's: took \(silent.seconds) s")
        }
    }

    @Test("on a kept-alive connection an exchange's deadline holds when it is later than the one the timer fires at")
    func laterDeadline() async throws {
        try await onWarmConnection(answering: 2) { client, base in
            // Answered, with a 2 s deadline: the timer now fires 2 s from here.
            #expect(await exchange(client, base, "/second", .seconds(2)).status == 200)
            let silent = await exchange(client, base, "/third", .seconds(5))
            #expect(silent.error == .timedOut(base + "/third"))
            #expect(silent.seconds >= 4.95 && silent.seconds < 60, "not when the timer first fires: took \(silent.seconds) s")
        }
    }
}
