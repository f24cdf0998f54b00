import HTTPTypes
import HummingbirdCore
import HummingbirdTLS
import HummingbirdWebSocket
import Logging
import NIOCore

/// How every server of a host meets a connection: behind TLS or not (`ServerTLS`), how
/// long a connection may take to send its first request head before it is answered `408`
/// and closed (`FirstRequestGuard`, which also answers a first request that is not HTTP),
/// and how long it may then sit idle.
public struct ServerTransport: Sendable {
    /// Every server speaks TLS with this certificate (`serve --tls-cert`), or none does.
    public var tls: ServerTLS?
    /// `serve --header-timeout`: 30 s by default, between Apache's 20-40 s and nginx's 60 s.
    public var headerTimeout: Duration
    /// `serve --idle-timeout`: how long a keep-alive connection may wait for its next
    /// request, or a request's body for its next bytes, before it is closed (Hummingbird's
    /// `idleTimeout`); 75 s by default, nginx's `keepalive_timeout`. A response still being
    /// written (a Server-Sent Events stream) and an upgraded WebSocket are not idle.
    public var idleTimeout: Duration

    public init(tls: ServerTLS? = nil, headerTimeout: Duration = .seconds(30), idleTimeout: Duration = .seconds(75)) {
        self.tls = tls
        self.headerTimeout = headerTimeout
        self.idleTimeout = idleTimeout
    }

    /// Plain HTTP/1.1.
    func http1() throws -> HTTPServerBuilder {
        let http1 = HTTP1Channel.Configuration(idleTimeout: TimeAmount(idleTimeout))
        return try secured(HTTPServerBuilder { [timeout] responder in
            FirstRequestGuarded(base: HTTP1Channel(responder: responder, configuration: http1), timeout: timeout)
        })
    }

    /// HTTP/1.1 that upgrades to WebSocket where `shouldUpgrade` says so. It is synchronous
    /// on purpose: Hummingbird then decides on the connection's event loop, where an `async`
    /// one would wait for a thread of the cooperative pool (and a test that blocks those
    /// threads with a socket handshake would wait for itself).
    func http1WebSocketUpgrade(
        configuration: HTTP1WebSocketUpgradeChannel.Configuration = .init(),
        shouldUpgrade: @escaping @Sendable (HTTPRequest, any Channel, Logger) throws
            -> ShouldUpgradeResult<WebSocketDataHandler<HTTP1WebSocketUpgradeChannel.Context>>
    ) throws -> HTTPServerBuilder {
        var http1 = configuration.http1
        http1.idleTimeout = TimeAmount(idleTimeout)
        let configuration = HTTP1WebSocketUpgradeChannel.Configuration(http1: http1, ws: configuration.ws)
        return try secured(HTTPServerBuilder { [timeout] responder in
            FirstRequestGuarded(base: HTTP1WebSocketUpgradeChannel(responder: responder, configuration: configuration, shouldUpgrade: shouldUpgrade),
                                timeout: timeout)
        })
    }

    /// The scheme a server's URL is printed with: `https` and `wss` with a certificate.
    public func scheme(_ plain: String) -> String {
        guard tls != nil else { return plain }
        return plain == "ws" ? "wss" : plain == "http" ? "https" : plain
    }

    private var timeout: TimeAmount { TimeAmount(headerTimeout) }

    /// `base` behind TLS when there is a certificate, else `base` as it is.
    private func secured(_ base: HTTPServerBuilder) throws -> HTTPServerBuilder {
        guard let tls else { return base }
        return try .tls(base, tlsConfiguration: tls.configuration)
    }
}
