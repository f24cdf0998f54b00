import AIBridgeClient
import AIBridgeDaemon
import AIBridgeWire
import Foundation
import LabKernel
import LabTestSupport
@testable import Live
import Testing

/// The AI bridge as a phone sees it, one body on both drivers: the relay, daemon and client
/// cores in process (virtual time), and the live relay on a real port with a daemon dialing
/// its tunnel and a phone on NIO sockets.
@Suite("Conformance: AI bridge on both drivers", .serialized)
struct BridgeConformanceTests {
    enum Driver: String, CaseIterable, Sendable {
        case simulated, loopback
    }

    static func lab(_ driver: Driver) async throws -> any BridgeLab {
        switch driver {
        case .simulated: return InProcessBridgeLab()
        case .loopback: return try await LoopbackBridgeLab()
        }
    }

    @Test("pair, a streamed chat, an unknown command, the daemon killed (503), restarted (re-pair), the old token refused",
          arguments: Driver.allCases)
    func pairChatAndRestart(driver: Driver) async throws {
        let lab = try await Self.lab(driver)
        let phone = try await lab.phone(7)
        await phone.feed(.pair(pin: try await lab.pin()))
        await phone.pump(until: { $0.contains { if case .paired = $0 { return true }; return false } }, seconds: 10)
        let paired = await phone.client.isPaired
        #expect(paired)
        let oldToken = await phone.client.snapshot.keychain?.token

        let chat = await phone.call("ai_chat", ["conversation_id": "c1", "message": "what should I cook tonight"])
        #expect(chat.finished && chat.error == nil)
        #expect(chat.text.hasPrefix("I read your 5-word message.") && chat.text.hasSuffix("go deeper on any part of it."))

        let unknown = await phone.call("future_command_that_doesnt_exist", [:])
        #expect(unknown.error == .unknownCommand(command: "future_command_that_doesnt_exist", supported: ["ai_chat", "list_models"]))

        await lab.killDaemon()
        let offline = await phone.call("list_models", [:], seconds: 5)
        #expect(offline.error == .bridgeOffline)

        try await lab.restartDaemon()
        let stale = await phone.call("list_models", [:])
        let pairedAfter401 = await phone.client.isPaired
        #expect(stale.error == .unauthorized && !pairedAfter401)
        await phone.feed(.pair(pin: try await lab.pin()))
        await phone.pump(until: { $0.filter { if case .paired = $0 { return true }; return false }.count == 2 }, seconds: 10)
        let models = await phone.call("list_models", [:])
        #expect(models.finished && models.error == nil)
        let newToken = await phone.client.snapshot.keychain?.token
        #expect(newToken != oldToken)
        await lab.stop()
    }
}

/// The live relay on a free port, a daemon driver dialing it, phones on `LiveBridgePhone`.
final class LoopbackBridgeLab: BridgeLab, @unchecked Sendable {
    let server: AIBridgeRelayLiveServer
    let host: LiveHost
    let base: String
    let data = TestPaths.scratchDirectory("conformance-bridge").path
    var daemon: AIBridgeDaemonDriver?
    let http = HTTPClient()

    init() async throws {
        server = try AIBridgeRelayLiveServer(dataDirectory: data, withDaemon: false, seed: 3, output: { _ in })
        let host = LiveHost(configuration: .init(ports: [server.name: 0]), servers: [server])
        self.host = host
        base = try #require(try await host.start().first).url
        try await startDaemon()
    }

    func startDaemon() async throws {
        let driver = try AIBridgeDaemonDriver(relay: base, dataDirectory: data + "/daemon", daemonID: "desk") { _ in }
        driver.start()
        daemon = driver
        let deadline = Date().addingTimeInterval(10)
        while !driver.isConnected && Date() < deadline { try await Task.sleep(for: .milliseconds(20)) }
    }

    func pin() async throws -> String {
        guard let pin = daemon?.pin else { throw CancellationError() }
        return pin
    }

    func phone(_ seed: UInt64) async throws -> any BridgePhoneDevice {
        let client = BridgeClient(snapshot: .init(deviceID: "phone-\(seed)", seed: StreamSeed(seed)), config: .init(relayURL: base))
        return Device(phone: LiveBridgePhone(client: client, http: http))
    }

    func killDaemon() async {
        daemon?.stop()
        daemon = nil
        try? await Task.sleep(for: .milliseconds(100))
    }

    func restartDaemon() async throws { try await startDaemon() }

    func stop() async {
        daemon?.stop()
        http.shutdown()
        try? await host.stop()
    }

    final class Device: BridgePhoneDevice, @unchecked Sendable {
        let phone: LiveBridgePhone
        let log = LockedBox<[BridgeClientEffect]>([])
        init(phone: LiveBridgePhone) {
            self.phone = phone
            let log = log
            Task { for await effect in phone.effects { log.withLock { $0.append(effect) } } }
        }
        var client: BridgeClient { get async { await phone.client } }
        var effects: [BridgeClientEffect] { get async { log.withLock { $0 } } }
        func feed(_ input: BridgeClientInput) async {
            await phone.feed(input)
            try? await Task.sleep(for: .milliseconds(10))
        }
        func pump(until done: @escaping @Sendable ([BridgeClientEffect]) -> Bool, seconds: Double) async {
            let deadline = Date().addingTimeInterval(seconds)
            while !done(log.withLock { $0 }) && Date() < deadline { try? await Task.sleep(for: .milliseconds(20)) }
        }
    }
}
