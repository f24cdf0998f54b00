import AIBridgeRelay
import Foundation
import LabTestSupport
@testable import Live
import Testing

@Suite("AI bridge daemon on real sockets: a tunnel that cannot open says why")
struct AIBridgeDaemonDriverTests {
    @Test("dialing a server that is not a relay: the daemon reports the refused upgrade's status (not a tunnel going down) and keeps it as the reason until a tunnel opens")
    func notARelay() async throws {
        let server = HostServer(defaultPort: 0, version: "test")
        let host = LiveHost(configuration: .init(ports: [server.name: 0]), servers: [server])
        let base = try #require(try await host.start().first).url
        let events = LockedBox<[AIBridgeDaemonDriver.Event]>([])
        let driver = try AIBridgeDaemonDriver(relay: base, identity: Array(repeating: 7, count: 32), daemonID: "desk-test") { event in
            events.withLock { $0.append(event) }
        }
        driver.start()
        let deadline = Date().addingTimeInterval(10)
        while driver.dialFailure == nil && Date() < deadline { try await Task.sleep(for: .milliseconds(10)) }
        driver.stop()
        try await host.stop()
        guard case .refused(let status)? = driver.dialFailure as? WebSocketClientError else {
            Issue.record("no refusal within 10 s: \(String(describing: driver.dialFailure))")
            return
        }
        #expect((400..<500).contains(status))
        let seen = events.withLock { $0 }
        #expect(seen.contains { if case .dialFailed(let reason) = $0 { return reason.contains("HTTP \(status)") }; return false }, "\(seen)")
        #expect(!seen.contains { if case .connected = $0 { return true }; return false }, "a tunnel that never opened did not go down: \(seen)")
    }
}

@Suite("AI bridge relay with its in-process daemon")
struct AIBridgeRelaySettleTests {
    @Test("settled, the relay already knows the PIN its daemon shows: what fleetlab serve prints can be confirmed at once")
    func firstPINKnown() async throws {
        let server = try AIBridgeRelayLiveServer(dataDirectory: TestPaths.scratchDirectory("relay-settle").path, withDaemon: true, seed: 5, output: { _ in })
        let host = LiveHost(configuration: .init(ports: [server.name: 0]), servers: [server])
        _ = try await host.start()
        await server.settle()
        let pin = try #require(server.daemon?.pin)
        #expect(server.lock.withLock { server.relay.state.offers(pin: pin) })
        #expect(server.details.first?.contains("pairing PIN: \(pin)") == true)
        server.daemon?.stop()
        try await host.stop()
    }
}
