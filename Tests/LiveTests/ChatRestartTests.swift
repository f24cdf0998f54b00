import Foundation
import LabCrypto
import LabKernel
import LabTestSupport
import SecureChatServer
import Testing
@testable import Live

/// What the chat server stores keeps its meaning across a restart over the same data:
/// times are wall-clock instants, not offsets from when a process started.
@Suite("Chat server: a restart moves nothing", .serialized)
struct ChatRestartTests {
    func send(_ server: SecureChatLiveServer, _ method: String, _ path: String, _ body: JSONValue? = nil, token: String? = nil) -> HTTPResponseMessage {
        var bytes: [UInt8] = []
        body?.write(to: &bytes)
        var headers = ["content-type": "application/json"]
        if let token { headers["authorization"] = "Bearer \(token)" }
        return server.handle(HTTPRequestMessage(method: method, target: "/api/v1" + path, headers: headers, body: bytes))
    }

    @Test("messages keep their created_at and order, and an access token still expires when it said it would")
    func nothingMoves() async throws {
        let data = TestPaths.scratchDirectory("chat-restart").path
        let shortTokens: (inout ChatServerConfig) -> Void = {
            $0.accessTokenLifetime = .seconds(1)
            $0.allowLegacyPlaintext = true
        }
        let first = try SecureChatLiveServer(dataDirectory: data, passwordCost: .minimum, seed: 1, configure: shortTokens)
        // The first process has been up a while when it stamps and issues.
        try await Task.sleep(for: .milliseconds(1_500))
        let account = send(first, "POST", "/auth/register", ["username": "clock", "password": "long enough pass"]).jsonBody
        let access = try #require(account?["access_token"]?.stringValue)
        let channel = try #require(send(first, "POST", "/channels", ["name": "g", "legacy_plaintext": true], token: access).jsonBody?["id"]?.stringValue)
        let sent = try #require(send(first, "POST", "/channels/\(channel)/messages", ["content": "before"], token: access).jsonBody)
        let issuedAt = Date()

        let second = try SecureChatLiveServer(dataDirectory: data, passwordCost: .minimum, seed: 2, configure: shortTokens)
        try await Task.sleep(for: .milliseconds(Int(max(0, 1.2 - Date().timeIntervalSince(issuedAt)) * 1_000)))
        #expect(send(second, "GET", "/users/me", token: access).status == 401, "the token's second is over, whatever the new process's uptime")
        let login = try #require(send(second, "POST", "/auth/login", ["username": "clock", "password": "long enough pass"]).jsonBody)
        let fresh = try #require(login["access_token"]?.stringValue)
        send(second, "POST", "/channels/\(channel)/messages", ["content": "after"], token: fresh)
        let page = send(second, "GET", "/channels/\(channel)/messages", token: fresh).jsonBody?["messages"]?.arrayValue ?? []
        #expect(page.map { $0["content"]?.stringValue } == ["before", "after"])
        #expect(page.first?["created_at"] == sent["created_at"], "the stamp read back is the one written")
        let stamps = page.compactMap { $0["created_at"]?.stringValue }.compactMap(RFC3339.parse)
        let wallNow = Int64(Date().timeIntervalSince1970 * 1000)
        #expect(stamps.count == 2 && stamps[0] < stamps[1] && stamps[1] <= wallNow + 1_000, "not stamped in the future: \(stamps) vs \(wallNow)")
        #expect(stamps[1] - stamps[0] >= 1_000, "real time passed between them, not 1 ms")
    }
}

@Suite("Chat server: password hashing outside the lock", .serialized)
struct ChatPasswordWorkTests {
    @Test("while logins hash passwords at the interactive cost, other requests are answered without waiting for them")
    func hashingDoesNotStall() async throws {
        let server = try SecureChatLiveServer(dataDirectory: TestPaths.scratchDirectory("chat-argon").path, passwordCost: .interactive, seed: 5,
                                              configure: { $0.authRequestsPerMinute = 10_000 })
        @Sendable func call(_ method: String, _ path: String, _ body: String = "", token: String? = nil) -> HTTPResponseMessage {
            var headers = ["content-type": "application/json"]
            if let token { headers["authorization"] = "Bearer \(token)" }
            return server.handle(HTTPRequestMessage(method: method, target: "/api/v1" + path, headers: headers, body: Array(body.utf8), peer: "127.0.0.1"))
        }
        // Hashing is the point: the run takes its turn for a core with the suite's other
        // CPU-bound work, and its waits are measured off the cooperative pool.
        let (hashTime, waits, statuses) = try await cpuBound { () throws -> (TimeInterval, [TimeInterval], [Int]) in
            let started = Date()
            let account = call("POST", "/auth/register", #"{"username":"busy","password":"long enough pass"}"#).jsonBody
            let hashTime = Date().timeIntervalSince(started)
            guard let token = account?["access_token"]?.stringValue else { return (hashTime, [], []) }
            let stop = LockedFlag()
            let logins = DispatchGroup()
            // Threads of their own: on Dispatch's global queue two endless hashing loops would
            // hold both of its threads on this machine, and everything else in the process
            // that runs there (URLSession's work queue, other tests' pipe readers) would wait
            // for the whole test.
            for _ in 0..<2 {
                logins.enter()
                Thread.detachNewThread {
                    while !stop.isSet { _ = call("POST", "/auth/login", #"{"username":"busy","password":"long enough pass"}"#) }
                    logins.leave()
                }
            }
            Thread.sleep(forTimeInterval: hashTime / 2)
            var waits: [TimeInterval] = [], statuses: [Int] = []
            for _ in 0..<15 {
                let t = Date()
                statuses.append(call("GET", "/users/me", token: token).status)
                waits.append(Date().timeIntervalSince(t))
                Thread.sleep(forTimeInterval: hashTime / 5)
            }
            stop.set()
            logins.wait()
            return (hashTime, waits, statuses)
        }
        #expect(statuses.count == 15 && statuses.allSatisfy { $0 == 200 }, "\(statuses)")
        let median = waits.sorted().dropFirst(waits.count / 2).first ?? .infinity
        #expect(median < hashTime / 2, "median wait \(median) s against one hash of \(hashTime) s")
    }
}

/// A flag threads can read and set.
final class LockedFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false
    var isSet: Bool { lock.withLock { value } }
    func set() { lock.withLock { value = true } }
}
