import Foundation
import LabKernel
import LabTestSupport
@testable import Live
import Testing

/// A kept-alive connection the server closes as the next request goes out (its idle
/// timeout ran out: Node's is 5 s, nginx's 75 s). Over a real network the close and the
/// request cross in flight; here a server closes at the request to make it certain. The
/// request goes again on a new connection when sending it twice is safe, and a server's
/// announced idle timeout keeps the client from reusing a connection that close to it.
@Suite("HTTP client: keep-alive connections, reused only while the server keeps them")
struct HTTPClientKeepAliveTests {
    static let ok = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"

    /// `requests` in turn on one client to a server that answers one request a connection,
    /// then closes at the next: each request's status or error, and what the server saw.
    func closingServer(_ requests: [HTTPRequestMessage], answering count: Int = 1,
                       with response: String = Self.ok, pause: Duration = .zero) async throws -> (outcomes: [Result<Int, HTTPClientError>], connections: Int, received: Int) {
        let listener = try TCPListener()
        let tally = listener.answerThenClose(count, with: response)
        defer { tally.stop() }
        var outcomes: [Result<Int, HTTPClientError>] = []
        try await withLoopClient { client in
            for request in requests {
                do {
                    outcomes.append(.success(try await client.send(request, to: "http://127.0.0.1:\(listener.port)", timeout: .seconds(30)).status))
                } catch {
                    outcomes.append(.failure(try #require(error as? HTTPClientError, "\(error)")))
                }
                try await Task.sleep(for: pause)
            }
        }
        return (outcomes, tally.connections, tally.requests)
    }

    static let get = HTTPRequestMessage(method: "GET", target: "/api/workflows")
    static let post = HTTPRequestMessage(method: "POST", target: "/api/v1/mobile/sync", body: Array(#"{"device_id":"p1"}"#.utf8))

    @Test("a GET on a connection the server closes under it goes again on a new one, once: the caller sees the answer")
    func idempotentRetried() async throws {
        let seen = try await closingServer([Self.get, Self.get])
        #expect(seen.outcomes == [.success(200), .success(200)])
        #expect(seen.connections == 2 && seen.received == 3, "the second GET went out twice: \(seen)")
    }

    @Test("a POST that reached the server and got no byte back fails as closed, not sent twice: the server may have acted on it; with an Idempotency-Key it goes again")
    func postNotRetried() async throws {
        let seen = try await closingServer([Self.post, Self.post])
        #expect(seen.outcomes == [.success(200), .failure(.closed)])
        #expect(seen.connections == 1 && seen.received == 2, "\(seen)")

        var keyed = Self.post
        keyed.headers["idempotency-key"] = "sync-p1-7"
        let retried = try await closingServer([keyed, keyed])
        #expect(retried.outcomes == [.success(200), .success(200)])
        #expect(retried.connections == 2 && retried.received == 3, "\(retried)")
    }

    @Test("a new connection closed under its first request is not tried again: the server is failing, not idle")
    func freshNotRetried() async throws {
        let seen = try await closingServer([Self.get], answering: 0)
        #expect(seen.outcomes == [.failure(.closed)])
        #expect(seen.connections == 1 && seen.received == 1, "\(seen)")
    }

    @Test("a server's Keep-Alive timeout bounds reuse, a second short of it: past that, a request takes a new connection instead of racing the close")
    func keepAliveHint() async throws {
        func hinted(_ seconds: Int) -> String { "HTTP/1.1 200 OK\r\nKeep-Alive: timeout=\(seconds), max=100\r\nContent-Length: 2\r\n\r\nok" }
        // Reused within the bound: one connection for both.
        let quick = try await closingServer([Self.post, Self.post], answering: 5, with: hinted(5))
        #expect(quick.outcomes == [.success(200), .success(200)] && quick.connections == 1, "\(quick)")
        // 1.3 s after the answer, past `timeout=2` less a second: the POST, which could not
        // have been sent again, goes out on a new connection.
        let later = try await closingServer([Self.post, Self.post], answering: 5, with: hinted(2), pause: .milliseconds(1_300))
        #expect(later.outcomes == [.success(200), .success(200)] && later.connections == 2 && later.received == 2, "\(later)")
    }

    @Test("an HTTP/1.0 answer without keep-alive, or any with Connection: close, ends its connection: the next request takes a new one, even from a server that leaves the socket open")
    func http10() async throws {
        let seen = try await closingServer([Self.post, Self.post], answering: 5, with: "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok")
        #expect(seen.outcomes == [.success(200), .success(200)] && seen.connections == 2, "\(seen)")
        let closed = try await closingServer([Self.post, Self.post], answering: 5, with: "HTTP/1.1 200 OK\r\nConnection: Upgrade, close\r\nContent-Length: 2\r\n\r\nok")
        #expect(closed.outcomes == [.success(200), .success(200)] && closed.connections == 2, "Connection: close among other tokens: \(closed)")
        let kept = try await closingServer([Self.post, Self.post], answering: 5, with: "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok")
        #expect(kept.outcomes == [.success(200), .success(200)] && kept.connections == 1, "\(kept)")
    }

    @Test("an informational answer before the real one (103 Early Hints, as a CDN may send) is not taken for it, and the next request gets its own answer")
    func informational() async throws {
        let hinted = "HTTP/1.1 103 Early Hints\r\nLink: </app.css>; rel=preload\r\n\r\n" + Self.ok
        let seen = try await closingServer([Self.get, Self.get], answering: 5, with: hinted)
        #expect(seen.outcomes == [.success(200), .success(200)] && seen.connections == 1, "\(seen)")
    }

    @Test("an answer to no request (a 408 as the server's idle timeout ends) closes the connection (NIO's decoder calls it an error): the next request takes a new one instead of racing the server's close")
    func unsolicited() async throws {
        let seen = try await closingServer([Self.post, Self.post], answering: 5, with: Self.ok + "HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\n\r\n")
        #expect(seen.outcomes == [.success(200), .success(200)] && seen.connections == 2, "\(seen)")
    }

    @Test("the headers that end or bound reuse: Connection: close among other tokens, Keep-Alive's timeout among its parameters")
    func headerTokens() {
        #expect(HTTPClient.tokens("Upgrade, Close").contains("close"))
        #expect(!HTTPClient.tokens("keep-alive").contains("close"))
        #expect(HTTPClient.keepAliveTimeout("timeout=5, max=1000") == 5)
        #expect(HTTPClient.keepAliveTimeout("max=1000,timeout=75") == 75)
        #expect(HTTPClient.keepAliveTimeout("max=1000") == nil)
        #expect(HTTPClient.keepAliveTimeout("timeout=soon") == nil)
        #expect(HTTPClient.repeatable(Self.get) && !HTTPClient.repeatable(Self.post))
    }
}
