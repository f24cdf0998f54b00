import Foundation
import Testing
import LabTestSupport

@Suite("fleetlab serve")
struct ServeCommandTests {
    @Test("serves on loopback, prints its endpoints and the sync server's key, and stops cleanly on SIGTERM")
    func serveAndStop() async throws {
        let served = try ServedFleetlab(data: TestPaths.scratchDirectory("serve-data").path)
        let host = try #require(served.output.split(separator: "\n").first { $0.contains("  host") }?
            .split(separator: " ").first { $0.hasPrefix("http://") }.map(String.init))
        let health = try await HTTPProbe.get(host + "/health")
        #expect(health.status == 200)
        let devices = try await HTTPProbe.request("GET", served.syncURL + "/api/v1/mobile/devices", headers: ["x-api-key": served.rootKey])
        #expect(devices.status == 200 && devices.text == #"{"items":[],"total":0}"#)
        #expect(try await HTTPProbe.request("GET", served.syncURL + "/api/v1/mobile/devices").status == 401)
        let chat = try #require(served.output.split(separator: "\n").first { $0.contains("  chat") }?
            .split(separator: " ").first { $0.hasPrefix("http://") }.map(String.init))
        let wellKnown = try await HTTPProbe.get(chat + "/.well-known/d3chat-server")
        #expect(wellKnown.status == 200 && wellKnown.text.contains(#""protocol_version":2"#))
        #expect(try await HTTPProbe.request("GET", chat + "/api/v1/users/me").status == 401)
        // A conversation's secrets never reach the logs.
        let json = ["content-type": "application/json"]
        let registered = try await HTTPProbe.request("POST", chat + "/api/v1/auth/register",
                                                     body: Data(#"{"username":"logcheck","password":"hunter2-secret-pass"}"#.utf8), headers: json)
        let access = try #require((registered.json as? [String: Any])?["access_token"] as? String)
        let channel = try await HTTPProbe.request("POST", chat + "/api/v1/channels", body: Data(#"{"name":"ops"}"#.utf8),
                                                  headers: json.merging(["authorization": "Bearer \(access)"]) { $1 })
        let channelID = try #require((channel.json as? [String: Any])?["id"] as? String)
        let sent = try await HTTPProbe.request("POST", chat + "/api/v1/channels/\(channelID)/messages",
                                               body: Data(#"{"content":"the launch code is 0000"}"#.utf8),
                                               headers: json.merging(["authorization": "Bearer \(access)"]) { $1 })
        #expect(sent.status == 201)
        served.stop()
        #expect(served.process.terminationStatus == 0)
        let logs = served.output + served.remainingOutput()
        for secret in [access, "hunter2-secret-pass", "the launch code"] { #expect(!logs.contains(secret)) }
    }

    @Test("a taken port is exit status 2 with a message, not a crash")
    func portTaken() throws {
        let blocker = try TCPListener()
        let data = TestPaths.scratchDirectory("serve-taken").path
        let result = try CommandRunner.fleetlab(["serve", "--port", "host=\(blocker.port)", "--port", "mobile-sync=0", "--port", "chat=0", "--data", data])
        #expect(result.status == 2)
        #expect(result.stderr.contains("port \(blocker.port) on 127.0.0.1 is already in use"))
        let bad = try CommandRunner.fleetlab(["serve", "--port", "agents=9", "--data", data])
        #expect(bad.status == 2 && bad.stderr.contains("no server named 'agents'"))
    }
}
