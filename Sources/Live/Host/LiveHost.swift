import Foundation
import Hummingbird
public import Logging
import NIOCore
import ServiceLifecycle
import UnixSignals

/// One running server, as printed by `fleetlab serve`.
public struct LiveEndpoint: Sendable, Hashable {
    public var name: String
    public var summary: String
    public var host: String
    public var port: Int
    /// `http`, or `ws` for a server that is a WebSocket endpoint only (`https` and `wss`
    /// behind TLS).
    public var scheme = "http"
    /// An IPv6 literal goes in brackets, as URLs write it.
    public var url: String { "\(scheme)://\(host.contains(":") ? "[\(host)]" : host):\(port)" }
}

/// Why the host could not start.
public enum LiveHostError: Error, CustomStringConvertible, Equatable, Sendable {
    case portInUse(server: String, host: String, port: Int)
    case cannotBind(server: String, host: String, port: Int, reason: String)
    case duplicatePort(Int, String, String)
    case bindFailed(host: String, reason: String)

    public var description: String {
        switch self {
        case .portInUse(let server, let host, let port):
            return "port \(port) on \(host) is already in use, so the \(server) server cannot start; "
                + "stop what holds it or choose another with --port \(server)=PORT"
        case .cannotBind(let server, let host, let port, let reason):
            return "cannot listen on \(host):\(port) for the \(server) server: \(reason)"
        case .bindFailed(let host, let reason):
            return "a server could not listen on \(host): \(reason) (was a port taken while starting?)"
        case .duplicatePort(let port, let a, let b):
            return "the \(a) and \(b) servers are both set to port \(port); give each its own port"
        }
    }
}

/// Runs reference servers on real sockets until SIGINT, SIGTERM or `shutdown()`.
///
/// Every server is a Hummingbird application in one `ServiceGroup`, so a signal stops
/// them all gracefully (in-flight requests finish). Ports are checked before anything
/// starts, so a taken port is a clear message and exit code, never a crash halfway up.
public final class LiveHost: Sendable {
    public struct Configuration: Sendable {
        public var host: String
        /// Per-server ports by server name; servers not named use their default.
        public var ports: [String: Int]
        public var logLevel: Logger.Level
        /// SIGTERM and SIGINT stop the servers (`fleetlab serve`). Off for servers inside a
        /// command that handles Ctrl-C itself (a load test's live dashboard): the host would
        /// otherwise take the signal from it.
        public var stopsOnSignals: Bool
        /// TLS for every server or none (`serve --tls-cert`), and the first request's deadline.
        public var transport: ServerTransport
        /// The host name or address clients reach the servers at (`serve --advertise`), nil:
        /// `publicHost` picks one.
        public var advertisedHost: String?

        public init(host: String = "127.0.0.1", ports: [String: Int] = [:], logLevel: Logger.Level = .notice, stopsOnSignals: Bool = true,
                    transport: ServerTransport = .init(), advertisedHost: String? = nil) {
            self.host = host
            self.ports = ports
            self.logLevel = logLevel
            self.stopsOnSignals = stopsOnSignals
            self.transport = transport
            self.advertisedHost = advertisedHost
        }

        /// Where clients reach the servers, printed and handed out: the advertised host, else
        /// the bound address, else (bound to every interface) the address of this machine's
        /// default route, so a phone on the same network can use what is printed.
        public var publicHost: String {
            if let advertisedHost { return advertisedHost }
            guard host == "0.0.0.0" || host == "::" else { return host }
            return NetworkAddress.reachableIPv4() ?? "127.0.0.1"
        }
    }

    public let configuration: Configuration
    public let servers: [any ReferenceServer]
    private let state = LockedBox<State>(State())

    struct State {
        var group: ServiceGroup?
        var endpoints: [LiveEndpoint] = []
        var shutdownRequested = false
        /// `run` in a task of its own, when `start` began it, and how it failed.
        var running: Task<Void, Never>?
        var failure: (any Error)?
    }

    public init(configuration: Configuration, servers: [any ReferenceServer]) {
        self.configuration = configuration
        self.servers = servers
    }

    public func port(for server: any ReferenceServer) -> Int {
        configuration.ports[server.name] ?? server.defaultPort
    }

    /// Checks every port, starts every server, calls `onReady` once all listen, and
    /// returns after a graceful shutdown.
    public func run(onReady: @escaping @Sendable ([LiveEndpoint]) -> Void) async throws {
        try preflight()
        var logger = Logger(label: "fleetlab.serve")
        logger.logLevel = configuration.logLevel
        let expected = servers.count
        var services: [any Service] = []
        for server in servers {
            let config = ApplicationConfiguration(
                address: .hostname(configuration.host, port: port(for: server)), serverName: "fleetlab-\(server.name)",
                reuseAddress: true)
            let name = server.name, summary = server.summary, host = configuration.publicHost, scheme = configuration.transport.scheme(server.scheme)
            services.append(try server.makeService(configuration: config, transport: configuration.transport) { [state] (channel: any Channel) in
                let endpoint = LiveEndpoint(name: name, summary: summary, host: host, port: channel.localAddress?.port ?? 0, scheme: scheme)
                server.listening(at: endpoint.url)
                let ready: [LiveEndpoint]? = state.withLock { s in
                    s.endpoints.append(endpoint)
                    return s.endpoints.count == expected ? s.endpoints : nil
                }
                if let ready { onReady(ready.sorted { $0.port < $1.port }) }
            })
        }
        let group = ServiceGroup(configuration: .init(
            services: services, gracefulShutdownSignals: configuration.stopsOnSignals ? [.sigterm, .sigint] : [], logger: logger))
        let stopEarly = state.withLock { s in
            s.group = group
            return s.shutdownRequested
        }
        if stopEarly { return }
        do {
            try await group.run()
        } catch {
            throw mapBindError(error)
        }
    }

    /// Runs the servers in a task of its own and returns their endpoints once all listen
    /// (sorted by port), or the error that kept them from it (a taken port): for servers
    /// inside another program (tests, benches). `stop` ends them.
    public func start() async throws -> [LiveEndpoint] {
        let (ready, continuation) = AsyncStream<Result<[LiveEndpoint], any Error>>.makeStream()
        let running = Task { [state] in
            do {
                try await run { continuation.yield(.success($0)) }
            } catch {
                state.withLock { $0.failure = error }
                continuation.yield(.failure(error))
            }
            continuation.finish()
        }
        state.withLock { $0.running = running }
        var iterator = ready.makeAsyncIterator()
        guard let first = await iterator.next() else { throw CancellationError() }
        return try first.get()
    }

    /// Stops what `start` began and waits until every server has; throws what made the
    /// servers fail, if anything did.
    public func stop() async throws {
        await shutdown()
        await state.withLock { $0.running }?.value
        if let failure = state.withLock({ $0.failure }) { throw failure }
    }

    /// Asks every server to stop gracefully (tests; the CLI relies on signals).
    public func shutdown() async {
        let group = state.withLock { s in
            s.shutdownRequested = true
            return s.group
        }
        await group?.triggerGracefulShutdown()
    }

    public var endpoints: [LiveEndpoint] { state.withLock { $0.endpoints } }

    /// Binds a throwaway socket on each port so a clash is reported before anything runs.
    func preflight() throws {
        try Self.checkPorts(host: configuration.host, servers.map { ($0.name, port(for: $0)) })
    }

    /// Checks that every named port (0: any) is distinct, then that each is free on `host`:
    /// a clash within the configuration is named first, whatever else holds the port.
    public static func checkPorts(host: String, _ ports: [(name: String, port: Int)]) throws(LiveHostError) {
        var seen: [Int: String] = [:]
        for (name, port) in ports where port != 0 {
            if let other = seen[port] { throw LiveHostError.duplicatePort(port, other, name) }
            seen[port] = name
        }
        for (name, port) in ports where port != 0 {
            switch PortProbe.check(host: host, port: port) {
            case .free: continue
            case .inUse: throw LiveHostError.portInUse(server: name, host: host, port: port)
            case .failed(let reason): throw LiveHostError.cannotBind(server: name, host: host, port: port, reason: reason)
            }
        }
    }

    func mapBindError(_ error: any Error) -> any Error {
        if let io = error as? IOError, io.errnoCode == EADDRINUSE {
            return LiveHostError.bindFailed(host: configuration.host, reason: "address already in use")
        }
        return error
    }
}

/// A value behind a lock, for the few bits of state the host shares with server callbacks.
public final class LockedBox<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value
    public init(_ value: Value) { self.value = value }
    public func withLock<T>(_ body: (inout Value) -> T) -> T {
        lock.lock()
        defer { lock.unlock() }
        return body(&value)
    }
}
