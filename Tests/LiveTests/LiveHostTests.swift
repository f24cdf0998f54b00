import Foundation
import Hummingbird
import NIOCore
import ServiceLifecycle
import Testing
import LabTestSupport
@testable import Live

@Suite("Live host")
struct LiveHostTests {
    /// Starts `servers` on ephemeral ports, runs `body` with their endpoints, shuts down.
    func withHost(_ servers: [any ReferenceServer], _ body: ([LiveEndpoint]) async throws -> Void) async throws {
        let host = LiveHost(configuration: .init(ports: Dictionary(uniqueKeysWithValues: servers.map { ($0.name, 0) })), servers: servers)
        let endpoints = try await host.start()
        do {
            try await body(endpoints)
        } catch {
            try? await host.stop()
            throw error
        }
        try await host.stop()
    }

    @Test("health, version and a JSON 404 over real HTTP on loopback")
    func hostRoutes() async throws {
        let catalog = [HostServer.ServerListing(name: "host", summary: "s", port: 7700)]
        try await withHost([HostServer(version: "9.9.9", catalog: { catalog })]) { endpoints in
            let base = try #require(endpoints.first).url
            #expect(base.hasPrefix("http://127.0.0.1:"))
            let health = try await HTTPProbe.get(base + "/health")
            #expect(health.status == 200 && health.text == #"{"status":"ok"}"#)
            let version = try await HTTPProbe.get(base + "/version")
            let json = try #require(version.json as? [String: Any])
            #expect(json["name"] as? String == "fleetlab" && json["version"] as? String == "9.9.9")
            #expect((json["servers"] as? [[String: Any]])?.first?["port"] as? Int == 7700)
            let missing = try await HTTPProbe.get(base + "/nope")
            #expect(missing.status == 404)
            #expect(missing.text == #"{"error":"not found"}"#)
            #expect(missing.headers["content-type"] == "application/json")
        }
    }

    /// A second server for multi-server tests: the host server's routes under another name.
    struct ExtraServer: ReferenceServer {
        let name: String
        let defaultPort: Int
        let summary = "another"
        func makeService(configuration: ApplicationConfiguration, transport: ServerTransport, onRunning: @escaping @Sendable (any Channel) async -> Void) throws -> any Service {
            try HostServer(version: "2").makeService(configuration: configuration, transport: transport, onRunning: onRunning)
        }
    }

    @Test("two servers run side by side on their own ports and stop together")
    func twoServers() async throws {
        try await withHost([HostServer(version: "1"), ExtraServer(name: "second", defaultPort: 0)]) { endpoints in
            #expect(Set(endpoints.map(\.name)) == ["host", "second"])
            #expect(Set(endpoints.map(\.port)).count == 2)
            for endpoint in endpoints {
                let reply = try await HTTPProbe.get(endpoint.url + "/health")
                #expect(reply.status == 200)
            }
        }
    }

    @Test("the URL a server is printed and handed out at: the advertised host, else the bound one; an IPv6 literal in brackets")
    func publicURLs() {
        #expect(LiveHost.Configuration(host: "127.0.0.1").publicHost == "127.0.0.1")
        #expect(LiveHost.Configuration(host: "0.0.0.0", advertisedHost: "laptop.local").publicHost == "laptop.local")
        #expect(LiveHost.Configuration(host: "0.0.0.0").publicHost != "0.0.0.0", "every interface is no address to reach")
        #expect(LiveEndpoint(name: "chat", summary: "", host: "::1", port: 7720).url == "http://[::1]:7720")
        #expect(LiveEndpoint(name: "desktop", summary: "", host: "10.0.0.2", port: 9099, scheme: "wss").url == "wss://10.0.0.2:9099")
    }

    @Test("bound to every interface, the printed host is the default route's address, one of this machine's, and reaches the server")
    func reachableHost() async throws {
        let printed = LiveHost.Configuration(host: "0.0.0.0").publicHost
        let interfaces = NetworkAddress.interfaceIPv4s()
        #expect(interfaces.contains(printed) || printed == "127.0.0.1", "\(printed) is not among \(interfaces)")
        // The kernel's own answer, where iproute2 is installed: the route's source address.
        if let route = try? CommandRunner.run("/usr/sbin/ip", ["-4", "route", "get", "203.0.113.1"]), route.status == 0,
           let source = route.stdout.split(separator: " ").split(separator: "src").dropFirst().first?.first {
            #expect(printed == String(source))
        }
        let host = LiveHost(configuration: .init(host: "0.0.0.0", ports: ["host": 0]), servers: [HostServer(version: "1")])
        let endpoint = try #require(try await host.start().first)
        let status = try? await HTTPProbe.get(endpoint.url + "/health").status
        try await host.stop()
        #expect(endpoint.host == printed)
        #expect(status == 200, "the printed URL reaches the server")
    }

    @Test("a taken port is a clear error before anything starts")
    func portTaken() async throws {
        let blocker = try TCPListener()
        let host = LiveHost(configuration: .init(ports: ["host": blocker.port]), servers: [HostServer(version: "1")])
        await #expect(throws: LiveHostError.portInUse(server: "host", host: "127.0.0.1", port: blocker.port)) {
            try await host.run { _ in Issue.record("started on a taken port") }
        }
        let message = LiveHostError.portInUse(server: "host", host: "127.0.0.1", port: blocker.port).description
        #expect(message.contains("already in use") && message.contains("--port host="))
    }

    @Test("two servers set to one port are refused, before and whether or not anything else holds it")
    func duplicatePorts() async throws {
        let blocker = try TCPListener()
        for port in [try ServedFleetlab.freePort(), blocker.port] {
            let host = LiveHost(configuration: .init(ports: ["host": port]),
                                servers: [HostServer(version: "1"), ExtraServer(name: "other", defaultPort: port)])
            await #expect(throws: LiveHostError.duplicatePort(port, "host", "other")) { try await host.run { _ in } }
        }
        withExtendedLifetime(blocker) {}
    }
}
