import Foundation
import LabCrypto
import LabKernel
import LabTestSupport
import SecureChatServer
import Testing
@testable import Live

/// `/auth` limits are keyed by the connection's address as the server sees it: one
/// client's lockout leaves another alone, and no header moves a client to a fresh bucket.
@Suite("Chat over real sockets: auth limits per client address", .serialized)
struct ChatAuthLimitTests {
    @Test("a client at 127.0.0.2 locked out by its failed logins does not block one at 127.0.0.1; a forged header changes nothing")
    func perAddress() async throws {
        let server = try SecureChatLiveServer(dataDirectory: TestPaths.scratchDirectory("chat-auth-limits").path, passwordCost: .minimum,
                                              configure: { $0.authRequestsPerMinute = 5 })
        let host = LiveHost(configuration: .init(ports: ["chat": 0]), servers: [server])
        let port = try #require(try await host.start().first).port
        defer { Task { await host.shutdown() } }
        let base = "http://127.0.0.1:\(port)/api/v1/auth/login"
        let json = ["content-type": "application/json"]
        func attempt(from source: String, forged: String? = nil) async throws -> Int {
            var headers = json
            if let forged { headers["x-forwarded-for"] = forged; headers["x-fleetlab-peer"] = forged }
            return try await HTTPProbe.request(from: source, "POST", base, body: Data(#"{"username":"nobody","password":"wrong wrong"}"#.utf8),
                                         headers: headers).status
        }
        var attacker: [Int] = []
        for n in 0..<8 { attacker.append(try await attempt(from: "127.0.0.2", forged: "10.9.9.\(n)")) }
        #expect(attacker.prefix(5).allSatisfy { $0 == 401 } && attacker.suffix(3).allSatisfy { $0 == 429 }, "\(attacker)")
        let other = try await attempt(from: "127.0.0.1")
        #expect(other == 401, "the other client's bucket is its own")
        try await host.stop()
    }
}
