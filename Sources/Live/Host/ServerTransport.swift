import HTTPTypes
import HummingbirdCore
import HummingbirdTLS
import HummingbirdWebSocket
import Logging
import NIOCore

/// How every server of a host meets a connection: behind TLS or not (`ServerTLS`), and how
/// long a connection may take to send its first request head before it is answered `408`
/// and closed (`FirstRequestGuard`, which also answers a first request that is not HTTP).
public struct ServerTransport: Sendable {
    /// Every server speaks TLS with this certificate (`serve --tls-cert`), or none does.
    public var tls: ServerTLS?
    /// `serve --header-timeout`: 30 s by default, between Apache's 20-40 s and nginx's 60 s.
    public var headerTimeout: Duration

    public init(tls: ServerTLS? = nil, headerTimeout: Duration = .seconds(30)) {
        self.tls = tls
        self.headerTimeout = headerTimeout
    }

    /// Plain HTTP/1.1.
    func http1() throws -> HTTPServerBuilder {
        try secured(HTTPServerBuilder { [timeout] responder in
            FirstRequestGuarded(base: HTTP1Channel(responder: responder), timeout: timeout)
        })
    }

    /// HTTP/1.1 that upgrades to WebSocket where `shouldUpgrade` says so.
    func http1WebSocketUpgrade(
        configuration: HTTP1WebSocketUpgradeChannel.Configuration = .init(),
        shouldUpgrade: @escaping @Sendable (HTTPRequest, any Channel, Logger) async throws
            -> ShouldUpgradeResult<WebSocketDataHandler<HTTP1WebSocketUpgradeChannel.Context>>
    ) throws -> HTTPServerBuilder {
        try secured(HTTPServerBuilder { [timeout] responder in
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
