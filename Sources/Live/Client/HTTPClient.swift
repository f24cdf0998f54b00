import Foundation
public import LabKernel
public import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import Synchronization

/// A small HTTP/1.1 client on SwiftNIO for the live drivers: keep-alive connections per
/// host, one request at a time on each, and a deadline on every exchange (connecting
/// included). A request that misses its deadline closes its connection and throws
/// `HTTPClientError.timedOut`; nothing waits forever.
///
/// Requests and answers are the cores' own `HTTPRequestMessage` and `HTTPResponseMessage`,
/// so a client core's effects go on the wire as they are. `https://` servers are reached
/// over TLS (`tls`: whose certificates it trusts), as a load test against a staging
/// deployment needs, through a forward proxy when `proxies` names one; the reference
/// servers on loopback are plain `http://`.
public final class HTTPClient: Sendable {
    /// The event loops its connections run on.
    public let group: any EventLoopGroup
    /// How it checks an `https://` server's certificate (and its sockets' `wss://`).
    public let tls: ClientTLS
    /// Which servers it reaches through a proxy (and its sockets).
    public let proxies: ProxyRoutes
    /// Idle connections by `host:port`, ready for their next request.
    let idle = Mutex<[String: [Connection]]>([:])
    /// Idle connections kept per host at most.
    let idlePerHost: Int

    public convenience init(idlePerHost: Int = 8, tls: ClientTLS = .system, proxies: ProxyRoutes = .direct) {
        self.init(group: MultiThreadedEventLoopGroup.singleton, idlePerHost: idlePerHost, tls: tls, proxies: proxies)
    }

    public init(group: any EventLoopGroup, idlePerHost: Int = 8, tls: ClientTLS = .system, proxies: ProxyRoutes = .direct) {
        self.group = group
        self.idlePerHost = idlePerHost
        self.tls = tls
        self.proxies = proxies
    }

    /// Sends `request` to the server at `baseURL` (`http://host:port` or `https://…`), its `path` and
    /// `query` as the target; throws on a transport failure or after `timeout`.
    public func send(_ request: HTTPRequestMessage, to baseURL: String, timeout: Duration = .seconds(10)) async throws -> HTTPResponseMessage {
        try await send(request, to: try Endpoint(baseURL), timeout: timeout)
    }

    /// A server's `http://host:port` or `https://host[:port]`, parsed once (Foundation's
    /// URL parser was a few per cent of a load test's CPU when it ran for every request).
    struct Endpoint: Sendable {
        let baseURL: String
        let host: String
        let port: Int
        /// Over TLS (`https://`).
        let secure: Bool
        /// `host:port`: the idle pool's key.
        let key: String
        /// The Host header: the port left out when it is the scheme's own (443, 80), as a
        /// browser or a phone's HTTP stack sends it to a deployment behind a load balancer.
        var authority: String { HTTPClient.authority(host, port, secure: secure) }

        /// `requiringPort`: a plain `http://` URL without an explicit port is refused (not
        /// taken as 80); `https://` means 443.
        init(_ baseURL: String, requiringPort: Bool = false) throws {
            guard let url = URL(string: baseURL), url.scheme == "http" || url.scheme == "https", let host = url.host,
                  url.port != nil || !requiringPort || url.scheme == "https" else {
                throw HTTPClientError.badURL(baseURL)
            }
            self.baseURL = baseURL
            self.host = host
            secure = url.scheme == "https"
            port = url.port ?? (secure ? 443 : 80)
            key = "\(host):\(port)"
        }
    }

    /// A keep-alive connection and the handler that collects its answers.
    struct Connection: Sendable {
        let channel: any Channel
        let exchange: HTTPExchangeHandler
        /// When it stops being reused: the server's `Keep-Alive: timeout=` less a margin,
        /// nil when the server named none.
        var reusableUntil: NIODeadline? = nil
    }

    /// A connection from the pool can be one the server is closing as the request goes out
    /// (its idle timeout ran out). The request is then sent again, once, on a new
    /// connection, when that cannot do it twice: it never reached the server, or its method
    /// is idempotent or it carries an idempotency key (Go's `net/http` rule). A POST that
    /// reached the server and got no byte back fails as `closed`: the server may have acted on it.
    func send(_ request: HTTPRequestMessage, to endpoint: Endpoint, timeout: Duration) async throws -> HTTPResponseMessage {
        let deadline = NIODeadline.now() + TimeAmount(timeout)
        let (connection, reused) = try await connection(to: endpoint, deadline: deadline)
        do {
            return try await exchange(request, on: connection, to: endpoint, deadline: deadline)
        } catch let stale as StaleConnection {
            guard reused, !stale.sent || Self.repeatable(request) else { throw HTTPClientError.closed }
            do {
                return try await exchange(request, on: try await newConnection(to: endpoint, deadline: deadline), to: endpoint, deadline: deadline)
            } catch is StaleConnection {
                throw HTTPClientError.closed
            }
        }
    }

    /// Whether sending `request` twice does what sending it once does (RFC 9110's idempotent
    /// methods), or the server is told it may see it twice (an `Idempotency-Key` header).
    static func repeatable(_ request: HTTPRequestMessage) -> Bool {
        switch request.method {
        case "GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE": true
        default: request.headers["idempotency-key"] != nil || request.headers["x-idempotency-key"] != nil
        }
    }

    func exchange(_ request: HTTPRequestMessage, on connection: Connection, to endpoint: Endpoint, deadline: NIODeadline) async throws -> HTTPResponseMessage {
        let channel = connection.channel
        let head = Self.head(of: request, to: endpoint, via: proxies.isDirect ? nil : proxies.proxy(for: endpoint.host, port: endpoint.port, secure: endpoint.secure))
        let body = request.body
        let promise = channel.eventLoop.makePromise(of: HTTPResponseMessage.self)
        // The answer is expected before the request goes out, both on the channel's loop:
        // directly when the caller runs there (a load test's phones do), else in one hop.
        let exchange = connection.exchange
        let timeout = HTTPClientError.timedOut(endpoint.baseURL + request.path)
        let start: @Sendable () -> Void = {
            exchange.expect(promise, by: deadline, else: timeout)
            channel.write(HTTPClientRequestPart.head(head), promise: nil)
            if !body.isEmpty { channel.write(HTTPClientRequestPart.body(.byteBuffer(ByteBuffer(bytes: body))), promise: nil) }
            channel.writeAndFlush(HTTPClientRequestPart.end(nil), promise: nil)
        }
        if channel.eventLoop.inEventLoop { start() } else { channel.eventLoop.execute(start) }
        do {
            let response = try await promise.futureResult.get()
            release(connection, key: endpoint.key, after: response)
            return response
        } catch {
            channel.close(promise: nil)
            throw error
        }
    }

    /// `request`'s head as it goes on the wire to `endpoint`: its path and query as the
    /// target, the Host header, its own headers in name order, its Content-Length, and
    /// `Connection: close` when the connection serves this request only. Sent to a `proxy`
    /// (plain `http://` only: an `https://` server's requests go through a tunnel as they
    /// are), the target is in absolute form, with the proxy's credentials when it has some.
    static func head(of request: HTTPRequestMessage, to endpoint: Endpoint, closing: Bool = false, via proxy: ClientProxy? = nil) -> HTTPRequestHead {
        var headers = HTTPHeaders()
        headers.add(name: "Host", value: endpoint.authority)
        for (name, value) in request.headers.sorted(by: { $0.key < $1.key }) where name != "host" && name != "content-length" {
            headers.add(name: name, value: value)
        }
        headers.add(name: "Content-Length", value: String(request.body.count))
        if closing { headers.add(name: "Connection", value: "close") }
        let forwarded = proxy?.forwards == true && !endpoint.secure
        if forwarded, let authorization = proxy?.authorization { headers.add(name: "Proxy-Authorization", value: authorization) }
        let target = (forwarded ? "http://" + endpoint.authority : "") + request.path + (request.query.isEmpty ? "" : "?" + request.query.sorted { $0.key < $1.key }
            .map { PercentEncoding.encode($0.key) + "=" + PercentEncoding.encode($0.value) }.joined(separator: "&"))
        return HTTPRequestHead(version: .http1_1, method: HTTPMethod(rawValue: request.method), uri: target, headers: headers)
    }

    /// An idle connection to `endpoint` (`reused`), or a new one.
    func connection(to endpoint: Endpoint, deadline: NIODeadline) async throws -> (Connection, reused: Bool) {
        // A connection on the calling thread's event loop first: a task running on that loop
        // (a load test's phones do) then sends and resumes without a thread hop.
        while let reused = idle.withLock({ pool -> Connection? in
            guard var connections = pool[endpoint.key], !connections.isEmpty else { return nil }
            let index = connections.lastIndex { $0.channel.eventLoop.inEventLoop } ?? connections.index(before: connections.endIndex)
            let connection = connections.remove(at: index)
            pool[endpoint.key] = connections
            return connection
        }) {
            if reused.reusableUntil.map({ NIODeadline.now() >= $0 }) == true {
                reused.channel.close(promise: nil)
            } else if reused.channel.isActive {
                return (reused, true)
            }
        }
        return (try await newConnection(to: endpoint, deadline: deadline), false)
    }

    func newConnection(to endpoint: Endpoint, deadline: NIODeadline) async throws -> Connection {
        let remaining = deadline - NIODeadline.now()
        guard remaining > .zero else { throw HTTPClientError.timedOut("connecting to \(endpoint.key)") }
        let exchange = HTTPExchangeHandler()
        let channel = try await connect(to: endpoint, timeout: remaining, then: exchange)
        return Connection(channel: channel, exchange: exchange)
    }

    /// A new connection to `endpoint` (TLS first when it is `https://`), HTTP/1.1 on it and
    /// `handler` last, on the calling thread's loop when that is one of the group's. Through
    /// a proxy: to the proxy, and for `https://` through a tunnel it opens.
    func connect<Handler: ChannelHandler & Sendable>(to endpoint: Endpoint, timeout: TimeAmount, then handler: Handler) async throws -> any Channel {
        let tls = endpoint.secure ? self.tls : nil
        let proxy = proxies.proxy(for: endpoint.host, port: endpoint.port, secure: endpoint.secure)
        // `http://` through an HTTP proxy goes to the proxy itself, which forwards each
        // request (`head(of:to:via:)` writes them in absolute form); everything else
        // through the proxy's tunnel.
        let forwarder = tls == nil && proxy?.forwards == true ? proxy : nil
        let tunnel = forwarder == nil ? proxy : nil
        let (host, port) = forwarder.map { ($0.host, $0.port) } ?? (endpoint.host, endpoint.port)
        do {
            return try await Self.open(host, port, through: tunnel, on: group.any(), deadline: NIODeadline.now() + timeout) { channel in
                if let tls { try channel.pipeline.syncOperations.addHandler(tls.handler(host: endpoint.host)) }
                try channel.pipeline.syncOperations.addHTTPClientHandlers()
                try channel.pipeline.syncOperations.addHandler(handler)
            }
        } catch let failure as HTTPClientError {
            throw failure
        } catch ChannelError.connectTimeout {
            throw HTTPClientError.timedOut("connecting to \(proxy.map { "proxy \($0)" } ?? endpoint.key)")
        } catch {
            throw HTTPClientError.unreachable("\(proxy.map { "proxy \($0)" } ?? endpoint.key): \(ConnectFailure.reason(error))")
        }
    }

    /// `host`, or `host:port` when `port` is not the scheme's default. An IPv6 literal goes
    /// in brackets (`[::1]:7710`), as in a URL: Foundation hands the host out without them.
    static func authority(_ host: String, _ port: Int, secure: Bool) -> String {
        port == (secure ? 443 : 80) ? bracketed(host) : hostPort(host, port)
    }

    /// `host:port`, port always given (a CONNECT's target), an IPv6 literal in brackets.
    static func hostPort(_ host: String, _ port: Int) -> String { bracketed(host) + ":\(port)" }

    static func bracketed(_ host: String) -> String { host.contains(":") ? "[\(host)]" : host }

    /// The address to connect to. An IP literal (the usual case: loopback) is used as it
    /// is; NIO's `connect(host:port:)` would resolve even that with `getaddrinfo` on
    /// Dispatch's global queue, which busy work elsewhere in the process can hold up for
    /// seconds. A name is resolved here, on the caller's thread.
    static func address(_ host: String, _ port: Int) throws -> SocketAddress {
        if let literal = try? SocketAddress(ipAddress: host, port: port) { return literal }
        return try SocketAddress.makeAddressResolvingHost(host, port: port)
    }

    /// Back to the pool after `response`, unless it is closed (`HTTPExchangeHandler` closes
    /// a connection the server does not keep). A `Keep-Alive: timeout=N` it sent (Node's
    /// servers send 5 s) bounds the reuse: a second short of it, so a request does not go
    /// out as the server closes the connection.
    func release(_ connection: Connection, key: String, after response: HTTPResponseMessage) {
        guard connection.channel.isActive else {
            connection.channel.close(promise: nil)
            return
        }
        var connection = connection
        if let hint = response.header("keep-alive"), let seconds = Self.keepAliveTimeout(hint) {
            connection.reusableUntil = .now() + .seconds(seconds) - Self.keepAliveMargin
        }
        let kept = idle.withLock { pool -> Bool in
            guard pool[key, default: []].count < idlePerHost else { return false }
            pool[key, default: []].append(connection)
            return true
        }
        if !kept { connection.channel.close(promise: nil) }
    }

    /// How long before the server's announced idle timeout a connection stops being reused
    /// (undici's `keepAliveTimeoutThreshold`).
    static let keepAliveMargin = TimeAmount.seconds(1)

    /// A header's comma-separated tokens, lowercased.
    static func tokens(_ value: String) -> [String] {
        value.lowercased().split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
    }

    /// The `timeout` parameter of a `Keep-Alive` header (`timeout=5, max=1000`), in seconds.
    static func keepAliveTimeout(_ value: String) -> Int64? {
        for token in tokens(value) where token.hasPrefix("timeout=") {
            return Int64(token.dropFirst("timeout=".count)).flatMap { $0 >= 0 ? $0 : nil }
        }
        return nil
    }

    /// Closes every idle connection.
    public func shutdown() {
        let all = idle.withLock { pool -> [Connection] in
            defer { pool.removeAll() }
            return pool.values.flatMap { $0 }
        }
        for connection in all { connection.channel.close(promise: nil) }
    }

    deinit { shutdown() }
}

public enum HTTPClientError: Error, CustomStringConvertible, Equatable {
    case badURL(String)
    case unreachable(String)
    case timedOut(String)
    /// The connection closed before a whole answer arrived.
    case closed
    /// The proxy answered a tunnel's CONNECT with this status (0: not an HTTP answer).
    case proxyRefused(status: Int)
    /// A SOCKS5 proxy refused the tunnel, and why (its reply, or the authentication).
    case socksRefused(String)

    public var description: String {
        switch self {
        case .badURL(let url): return "not an http://host:port or https:// URL: \(url)"
        case .unreachable(let what): return "cannot connect to \(what)"
        case .timedOut(let what): return "no answer in time: \(what)"
        case .closed: return "the connection closed before the answer was complete"
        case .proxyRefused(let status): return "the proxy refused the tunnel (HTTP \(status))"
        case .socksRefused(let why): return "the SOCKS proxy refused the tunnel (\(why))"
        }
    }
}

/// An error that is a server's answer with a status the caller did not accept.
public protocol HTTPStatusFailure: Error {
    var status: Int { get }
}

/// Why an exchange failed, in a few words a load test's summary counts them by: `HTTP 503`,
/// `timeout`, `unreachable`, `connection closed`, `TLS handshake failed`.
public enum ExchangeFailure {
    public static func reason(status: Int) -> String { "HTTP \(status)" }

    public static func reason(_ error: any Error) -> String {
        if let refused = error as? any HTTPStatusFailure { return reason(status: refused.status) }
        // A certificate not trusted, a name that does not match, a protocol not agreed.
        if error is NIOSSLError || error is NIOSSLExtraError { return "TLS handshake failed" }
        switch error as? HTTPClientError {
        case .timedOut: return "timeout"
        case .unreachable: return "unreachable"
        case .closed: return "connection closed"
        case .badURL: return "bad URL"
        case .proxyRefused(let status): return "proxy refused (HTTP \(status))"
        case .socksRefused(let why): return "proxy refused (SOCKS: \(why))"
        case nil: return "\(type(of: error))"
        }
    }
}

/// Where a live driver's requests go: the seam one test body uses to run the same client
/// code against a server core in process (`InProcessTransport`) and against a real server
/// on a socket (`HTTPClient.transport(to:)`).
public protocol HTTPTransport: Sendable {
    /// The answer to `request` (its path and query are the target); throws when none
    /// comes within `timeout`.
    func send(_ request: HTTPRequestMessage, timeout: Duration) async throws -> HTTPResponseMessage
}

extension HTTPClient {
    /// This client's requests to the server at `baseURL` (a URL that is not `http://host:port`
    /// fails each request with `badURL`).
    public func transport(to baseURL: String) -> some HTTPTransport { Target(client: self, endpoint: Result { try Endpoint(baseURL) }) }

    struct Target: HTTPTransport {
        let client: HTTPClient
        let endpoint: Result<Endpoint, any Error>

        func send(_ request: HTTPRequestMessage, timeout: Duration) async throws -> HTTPResponseMessage {
            try await client.send(request, to: try endpoint.get(), timeout: timeout)
        }
    }
}

/// A server core answering in process, as a function call: no socket, no encoding beyond
/// what the core itself reads and writes.
public struct InProcessTransport: HTTPTransport {
    let handle: @Sendable (HTTPRequestMessage) throws -> HTTPResponseMessage

    public init(handle: @escaping @Sendable (HTTPRequestMessage) throws -> HTTPResponseMessage) { self.handle = handle }

    public func send(_ request: HTTPRequestMessage, timeout: Duration) async throws -> HTTPResponseMessage { try handle(request) }
}
