public import Foundation

/// `fleetlab serve` as a child process, for loopback tests: started on given ports and a
/// data directory, with the mobile sync server's URL and root key read from what it prints.
public final class ServedFleetlab {
    public let process: Process
    public let output: String
    public let syncURL: String
    public let rootKey: String
    public let chatURL: String
    public let hostURL: String
    public let agentURL: String
    public let aiBridgeURL: String
    /// The desktop bridge's `ws://` endpoint.
    public let desktopURL: String
    /// The pairing PIN the in-process AI bridge daemon offered first.
    public let aiPIN: String
    /// The development token it printed for the agent runtime (empty with --no-auth).
    public let agentToken: String

    public struct Failure: Error, CustomStringConvertible {
        public var output: String
        public var description: String { "fleetlab serve did not come up; it printed:\n\(output)" }
    }

    /// A port that was free a moment ago (taken and released).
    public static func freePort() throws -> Int {
        let listener = try TCPListener()
        return listener.port
    }

    /// Starts it and waits for its lines off the cooperative pool (a start takes seconds on
    /// a busy machine, and the pool's two threads serve every other test meanwhile).
    public static func start(syncPort: Int = 0, data: String, extra: [String] = [], environment: [String: String] = [:]) async throws -> ServedFleetlab {
        try await offPool { try ServedFleetlab(syncPort: syncPort, data: data, extra: extra, environment: environment) }
    }

    public init(syncPort: Int = 0, data: String, extra: [String] = [], environment: [String: String] = [:]) throws {
        process = try CommandRunner.start(["serve", "--port", "host=0", "--port", "mobile-sync=\(syncPort)", "--port", "chat=0", "--port", "agent-runtime=0", "--port", "ai-bridge=0", "--port", "desktop-bridge=0", "--data", data] + extra,
                                          environment: environment)
        let out = (process.standardOutput as! Pipe).fileHandleForReading
        var text = ""
        let deadline = Date().addingTimeInterval(30)
        // Every server has printed its lines once the last of these is out.
        while !((text.contains("dashboard:") || text.contains("no auth")) && text.contains("WebSocket:")
                && (text.contains("token for app_id=") || text.contains("identifiers in paths"))
                && (text.contains("pairing PIN:") || text.contains("no daemon here"))
                && (text.contains("modes: ") || extra.contains("desktop-bridge"))), Date() < deadline {
            let chunk = out.availableData
            if chunk.isEmpty { break }
            text += String(decoding: chunk, as: UTF8.self)
        }
        output = text
        let lines = text.split(separator: "\n")
        // http:// and ws://, or https:// and wss:// behind `--tls-cert`.
        let isURL = { (word: Substring) in ["http://", "https://", "ws://", "wss://"].contains { word.hasPrefix($0) } }
        guard let url = lines.first(where: { $0.contains("mobile-sync") && $0.contains("://") })?
            .split(separator: " ").first(where: isURL).map(String.init) else {
            process.terminate()
            throw Failure(output: text)
        }
        syncURL = url
        func endpoint(_ name: String) -> String {
            lines.first { $0.hasPrefix("  \(name) ") }?.split(separator: " ").first(where: isURL).map(String.init) ?? ""
        }
        chatURL = endpoint("chat")
        hostURL = endpoint("host")
        agentURL = endpoint("agent-runtime")
        aiBridgeURL = endpoint("ai-bridge")
        desktopURL = endpoint("desktop-bridge")
        aiPIN = lines.first { $0.contains("pairing PIN:") }?.split(separator: " ").first { $0.count == 6 && $0.allSatisfy(\.isNumber) }.map(String.init) ?? ""
        agentToken = lines.first { $0.contains("token for app_id=") }?.split(separator: " ").last.map(String.init) ?? ""
        rootKey = lines.first { $0.contains("root API key:") }?.split(separator: " ").dropFirst(3).first.map(String.init) ?? ""
    }

    /// Stops it the way Ctrl-C does and waits.
    public func stop() {
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGTERM)
        process.waitUntilExit()
    }

    /// Everything it printed after starting, on stdout and stderr (call after `stop`).
    public func remainingOutput() -> String {
        var all = ""
        for pipe in [process.standardOutput, process.standardError] {
            if let pipe = pipe as? Pipe { all += String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self) }
        }
        return all
    }

    deinit { stop() }
}
