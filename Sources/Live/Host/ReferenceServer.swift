public import Hummingbird
public import NIOCore
public import ServiceLifecycle

/// A server that `fleetlab serve` runs on a port of its own.
///
/// How a later server core mounts itself: conform a type to this protocol, build the
/// Hummingbird application in `makeService` (routes, WebSocket upgrade, middleware) with
/// the configuration the host passes (bind address, server name), and add an instance to
/// the list in `ServeCommand`. The host binds every server, reports their endpoints once
/// all are listening, and shuts them down together on SIGINT or SIGTERM. docs/live.md
/// walks through an example.
public protocol ReferenceServer: Sendable {
    /// A short name used in logs, the endpoint list and `--port NAME=PORT`.
    var name: String { get }
    /// The port used unless the command line says otherwise.
    var defaultPort: Int { get }
    /// What a developer points an app at, printed with the endpoint ("orch8 mobile sync").
    var summary: String { get }
    /// Lines printed under the endpoint once it listens (keys a developer needs, …).
    var details: [String] { get }
    /// The URL scheme printed: `http`, or `ws` for a WebSocket-only endpoint.
    var scheme: String { get }
    /// The service to run, on a server `transport` builds (TLS or not, its first request
    /// guarded). `onRunning`
    /// must be passed to the application so the host learns the bound port (which differs
    /// from the requested one when it is 0).
    func makeService(
        configuration: ApplicationConfiguration, transport: ServerTransport,
        onRunning: @escaping @Sendable (any Channel) async -> Void
    ) throws -> any Service
    /// It listens, and clients reach it at `url` (the host's advertised address and the
    /// bound port, `https` behind TLS): a server that hands out its own address (a
    /// discovery document, a manifest's links, a pairing answer) takes it from here.
    func listening(at url: String)
    /// Returns once what `details` tells a person holds (or after a bounded wait): the
    /// AI bridge relay's first PIN is one its relay already knows, so a phone can use it the
    /// moment it is printed. `fleetlab serve` reports the server ready after this.
    func settle() async
}

extension ReferenceServer {
    public var details: [String] { [] }
    public var scheme: String { "http" }
    public func listening(at url: String) {}
    public func settle() async {}
}
