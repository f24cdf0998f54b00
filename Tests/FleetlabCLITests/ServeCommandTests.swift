import Foundation
import Testing
import LabTestSupport

@Suite("fleetlab serve")
struct ServeCommandTests {
    @Test("serves on loopback, prints its endpoints and stops cleanly on SIGTERM")
    func serveAndStop() async throws {
        let blocker = try TCPListener()  // find a free port by taking one and releasing it
        let port = blocker.port
        _ = consume blocker
        let data = TestPaths.scratchDirectory("serve-data").path
        let process = try CommandRunner.start(["serve", "--port", "host=\(port)", "--port", "mobile-sync=0", "--data", data])
        let out = (process.standardOutput as! Pipe).fileHandleForReading
        var text = ""
        let deadline = Date().addingTimeInterval(20)
        while !text.contains("dashboard:"), Date() < deadline {
            let chunk = out.availableData
            if chunk.isEmpty { break }
            text += String(decoding: chunk, as: UTF8.self)
        }
        #expect(text.contains("http://127.0.0.1:\(port)"), "\(text)")
        let health = try await HTTPProbe.get("http://127.0.0.1:\(port)/health")
        #expect(health.status == 200)
        // The sync server prints its root key; it opens the API.
        let key = try #require(text.split(separator: "\n").first { $0.contains("root API key:") }?
            .split(separator: " ").dropFirst(3).first.map(String.init))
        let sync = try #require(text.split(separator: "\n").first { $0.contains("mobile-sync") && $0.contains("http://") }?
            .split(separator: " ").first { $0.hasPrefix("http://") }.map(String.init))
        let devices = try await HTTPProbe.request("GET", sync + "/api/v1/mobile/devices", headers: ["x-api-key": key])
        #expect(devices.status == 200 && devices.text == #"{"items":[],"total":0}"#)
        kill(process.processIdentifier, SIGTERM)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
    }

    @Test("a taken port is exit status 2 with a message, not a crash")
    func portTaken() throws {
        let blocker = try TCPListener()
        let data = TestPaths.scratchDirectory("serve-taken").path
        let result = try CommandRunner.fleetlab(["serve", "--port", "host=\(blocker.port)", "--port", "mobile-sync=0", "--data", data])
        #expect(result.status == 2)
        #expect(result.stderr.contains("port \(blocker.port) on 127.0.0.1 is already in use"))
        let bad = try CommandRunner.fleetlab(["serve", "--port", "chat=9", "--data", data])
        #expect(bad.status == 2 && bad.stderr.contains("no server named 'chat'"))
    }
}
