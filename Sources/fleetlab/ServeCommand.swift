import ArgumentParser
import Foundation
import Live
import Simulator

struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Run the reference servers for real on 127.0.0.1 until Ctrl-C.",
        discussion: """
        Each server listens on its own port. Ports: --port NAME=PORT (repeatable), e.g. \
        --port host=9000. A taken port is reported before anything starts (exit status 2).

        SIGINT and SIGTERM stop every server gracefully.
        """)

    @Option(help: "Address to bind (default 127.0.0.1; use 0.0.0.0 to expose on the network).")
    var host = "127.0.0.1"

    @Option(name: .customLong("port"), help: "A server's port as NAME=PORT (host=7700 by default).")
    var ports: [String] = []

    @Option(help: "Directory for the servers' SQLite files.")
    var data = ".fleetlab-data"

    @Flag(name: .customLong("no-auth"), help: "Accept every request without an API key (local development).")
    var noAuth = false

    func run() async throws {
        var portMap: [String: Int] = [:]
        let servers: [any ReferenceServer]
        do {
            servers = try Self.servers(data: data, authRequired: !noAuth)
        } catch {
            throw CLIFailure.badInput("cannot open the servers' data under \(data): \(error)")
        }
        for entry in ports {
            let parts = entry.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2, let port = Int(parts[1]), (0...65_535).contains(port) else {
                throw CLIFailure.badInput("--port takes NAME=PORT with PORT in 0...65535, got '\(entry)'")
            }
            guard servers.contains(where: { $0.name == parts[0] }) else {
                throw CLIFailure.badInput("--port: no server named '\(parts[0])'; servers: \(servers.map(\.name).joined(separator: ", "))")
            }
            portMap[parts[0]] = port
        }
        let live = LiveHost(configuration: .init(host: host, ports: portMap), servers: servers)
        do {
            try await live.run { endpoints in
                var lines = ["fleetlab serve \(FleetlabVersion.string) — listening (Ctrl-C to stop)"]
                for e in endpoints {
                    lines.append("  \(e.name)\(String(repeating: " ", count: max(1, 12 - e.name.count)))\(e.url)  \(e.summary)")
                    for detail in servers.first(where: { $0.name == e.name })?.details ?? [] { lines.append("      \(detail)") }
                }
                FileHandle.standardOutput.write(Data((lines.joined(separator: "\n") + "\n").utf8))
            }
        } catch let error as LiveHostError {
            throw CLIFailure.badInput(error.description)
        }
        print("fleetlab serve: stopped")
    }

    /// Every server `fleetlab serve` runs. Later reference servers are added here.
    static func servers(data: String, authRequired: Bool) throws -> [any ReferenceServer] {
        let sync = try MobileSyncLiveServer(dataDirectory: data, authRequired: authRequired)
        let chat = try SecureChatLiveServer(dataDirectory: data)
        let catalog = [HostServer.ServerListing(name: sync.name, summary: sync.summary, port: sync.defaultPort),
                       HostServer.ServerListing(name: chat.name, summary: chat.summary, port: chat.defaultPort)]
        return [HostServer(version: FleetlabVersion.string, catalog: catalog), sync, chat]
    }
}
