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
        let process = try CommandRunner.start(["serve", "--port", "host=\(port)"])
        let out = (process.standardOutput as! Pipe).fileHandleForReading
        var text = ""
        let deadline = Date().addingTimeInterval(20)
        while !text.contains("listening"), Date() < deadline {
            let chunk = out.availableData
            if chunk.isEmpty { break }
            text += String(decoding: chunk, as: UTF8.self)
        }
        #expect(text.contains("http://127.0.0.1:\(port)"), "\(text)")
        let health = try await HTTPProbe.get("http://127.0.0.1:\(port)/health")
        #expect(health.status == 200)
        kill(process.processIdentifier, SIGTERM)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
    }

    @Test("a taken port is exit status 2 with a message, not a crash")
    func portTaken() throws {
        let blocker = try TCPListener()
        let result = try CommandRunner.fleetlab(["serve", "--port", "host=\(blocker.port)"])
        #expect(result.status == 2)
        #expect(result.stderr.contains("port \(blocker.port) on 127.0.0.1 is already in use"))
        let bad = try CommandRunner.fleetlab(["serve", "--port", "chat=9"])
        #expect(bad.status == 2 && bad.stderr.contains("no server named 'chat'"))
    }
}
