import Foundation
import LabKernel
public import NIOCore
import NIOPosix

/// A proxy between the live clients and their servers, as a staging deployment reached
/// from a corporate network needs (k6 and curl read the same settings): an HTTP proxy or a
/// SOCKS5 one (an `ssh -D` tunnel to a bastion, say).
///
/// Through an HTTP proxy, an `http://` server is asked in absolute form (`POST
/// http://host:port/path`), one keep-alive connection to the proxy per server; an
/// `https://` server and every WebSocket (`ws://`, `wss://`) go through a tunnel:
/// `CONNECT host:port`, and once the proxy answers 2xx the connection carries TLS and HTTP
/// as it would directly. Through a SOCKS5 proxy every connection is a tunnel (RFC 1928's
/// CONNECT, names resolved by the proxy). A user and password in the proxy's URL go out as
/// `Proxy-Authorization: Basic`, or as SOCKS5's user and password (RFC 1929); they are not
/// printed (`description` leaves them out) nor written to results.
public struct ClientProxy: Sendable, Equatable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        case http
        case socks5
    }

    public let kind: Kind
    public let host: String
    public let port: Int
    /// The URL's scheme as given (`http`, `socks5`, `socks5h`), for `description`.
    let scheme: String
    let user: String?
    let password: String?

    /// `http://[user:password@]host[:port]` (port 80 when none is given, as for any
    /// `http://` URL), or `socks5://` / `socks5h://` (port 1080; both let the proxy
    /// resolve names). A proxy spoken to over TLS (`https://`) is refused.
    public init(_ url: String) throws {
        guard let parsed = URL(string: url.contains("://") ? url : "http://" + url), let host = parsed.host, !host.isEmpty else {
            throw HTTPClientError.badURL(ClientProxy.redacted(url))
        }
        switch parsed.scheme {
        case "http": kind = .http
        case "socks5", "socks5h": kind = .socks5
        default:
            throw HTTPClientError.badURL("\(ClientProxy.redacted(url)): a proxy is http://host:port (spoken to in plain HTTP) or socks5://host:port")
        }
        scheme = parsed.scheme ?? "http"
        self.host = host
        port = parsed.port ?? (kind == .http ? 80 : 1080)
        user = parsed.user(percentEncoded: false)
        password = user == nil ? nil : parsed.password(percentEncoded: false) ?? ""
        if kind == .socks5, let user, user.utf8.count > 255 || password!.utf8.count > 255 {
            throw HTTPClientError.badURL("\(ClientProxy.redacted(url)): a SOCKS5 user and password are at most 255 bytes each")
        }
    }

    /// `Basic …` for an HTTP proxy when the URL carries a user (and password).
    var authorization: String? {
        guard kind == .http, let user else { return nil }
        return "Basic " + Base64.encode(Array((user + ":" + (password ?? "")).utf8))
    }

    /// Whether an `http://` server's requests are handed to the proxy to forward (an HTTP
    /// proxy) rather than sent through a tunnel (SOCKS5).
    var forwards: Bool { kind == .http }

    /// The proxy without its credentials, for summaries and errors.
    public var description: String { scheme + "://" + HTTPClient.authority(host, port, secure: false) }

    /// Whether the proxy is told who is asking.
    public var authenticates: Bool { user != nil }

    /// `text` with any `user:password@` taken out (a URL that failed to parse is still
    /// quoted in the error, but not its secret).
    static func redacted(_ text: String) -> String {
        guard let at = text.lastIndex(of: "@") else { return text }
        let start = text.range(of: "://")?.upperBound ?? text.startIndex
        return String(text[..<start]) + "…@" + String(text[text.index(after: at)...])
    }
}

/// Which servers the live clients reach through which proxy: one for every server
/// (`--proxy`), or the environment's `HTTP_PROXY` (for `http://` and `ws://`) and
/// `HTTPS_PROXY` (for `https://` and `wss://`), lowercase names too, as curl and Go read
/// them, and curl's `ALL_PROXY` for a scheme neither names (often a `socks5://` one).
/// `NO_PROXY` lists servers reached directly: a host, a domain (`example.com`,
/// `.example.com` and `*.example.com` all cover its subdomains), an address, a range of addresses
/// (`10.0.0.0/8`, `fd00::/8`), any of these but ranges with a port (`sync.lan:8443`,
/// `[fd00::5]:443`: that port only), as Go reads them, or `*` for all. Under the
/// environment's proxies, loopback servers are always reached directly (Go's rule), so a
/// machine's proxy settings do not reroute a test of `fleetlab serve`.
public struct ProxyRoutes: Sendable, Equatable {
    public var http: ClientProxy?
    public var https: ClientProxy?
    public var bypass: [String]
    /// Loopback servers skip the proxy (the environment's proxies, not `--proxy`).
    public var bypassLoopback: Bool

    public static let direct = ProxyRoutes(http: nil, https: nil, bypass: [], bypassLoopback: true)

    public init(http: ClientProxy?, https: ClientProxy?, bypass: [String], bypassLoopback: Bool) {
        self.http = http
        self.https = https
        self.bypass = bypass.map { $0.lowercased() }
        self.bypassLoopback = bypassLoopback
    }

    /// Every server through `proxy`, but those `noProxy` (a `NO_PROXY` list) names.
    public static func every(_ proxy: ClientProxy, noProxy: String?) -> ProxyRoutes {
        ProxyRoutes(http: proxy, https: proxy, bypass: list(noProxy), bypassLoopback: false)
    }

    /// The proxies `environment` names (none: `.direct`).
    public static func environment(_ environment: [String: String]) throws -> ProxyRoutes {
        func value(_ name: String) -> String? {
            (environment[name] ?? environment[name.lowercased()]).flatMap { $0.isEmpty ? nil : $0 }
        }
        let fallback = try value("ALL_PROXY").map(ClientProxy.init)
        return ProxyRoutes(http: try value("HTTP_PROXY").map(ClientProxy.init) ?? fallback, https: try value("HTTPS_PROXY").map(ClientProxy.init) ?? fallback,
                           bypass: list(value("NO_PROXY")), bypassLoopback: true)
    }

    static func list(_ text: String?) -> [String] {
        (text ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    /// Whether any server goes through a proxy.
    public var isDirect: Bool { http == nil && https == nil }

    /// The proxy for a server at `host:port` (`secure`: `https://` or `wss://`), or nil to
    /// go direct.
    public func proxy(for host: String, port: Int, secure: Bool) -> ClientProxy? {
        guard let proxy = secure ? https : http else { return nil }
        let name = host.lowercased()
        if bypassLoopback, name == "localhost" || name == "::1" || name.hasPrefix("127.") { return nil }
        for entry in bypass {
            if entry == "*" || Self.address(name, isIn: entry) { return nil }
            let (pattern, entryPort) = Self.split(entry)
            if let entryPort, entryPort != port { continue }
            if Self.host(pattern, matches: name) { return nil }
        }
        return proxy
    }

    /// The proxy for the server at `url` (`http://` or `https://`), read as the client reads
    /// it (host, port, scheme), or nil to go direct or for a URL the client would refuse.
    public func proxy(forURL url: String) -> ClientProxy? {
        guard let endpoint = try? HTTPClient.Endpoint(url) else { return nil }
        return proxy(for: endpoint.host, port: endpoint.port, secure: endpoint.secure)
    }

    /// Whether a `NO_PROXY` host covers `name`: an address the same address (in any of its
    /// spellings); a domain, `example.com`, `.example.com` or `*.example.com`, that name
    /// and its subdomains.
    static func host(_ pattern: String, matches name: String) -> Bool {
        switch (bytes(of: pattern), bytes(of: name)) {
        case let (address?, other?): return address == other
        case (nil, nil):
            let domain = pattern.hasPrefix("*.") ? String(pattern.dropFirst(2)) : pattern.hasPrefix(".") ? String(pattern.dropFirst()) : pattern
            return name == domain || name.hasSuffix("." + domain)
        case (_?, nil), (nil, _?): return false
        }
    }

    /// A `NO_PROXY` entry's host and port, as Go reads them: `host:port`, `[::1]:8080` and
    /// `10.0.0.1:80` name one port; `host`, `::1` (an IPv6 literal without brackets has
    /// more than one colon) and `[::1]` every port.
    static func split(_ entry: String) -> (host: String, port: Int?) {
        if entry.hasPrefix("["), let close = entry.firstIndex(of: "]") {
            let host = String(entry[entry.index(after: entry.startIndex)..<close])
            let rest = entry[entry.index(after: close)...]
            return (host, rest.hasPrefix(":") ? Int(rest.dropFirst()) : nil)
        }
        let parts = entry.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2, let port = Int(parts[1]) else { return (entry, nil) }
        return (String(parts[0]), port)
    }

    /// Whether `host` is an IP address inside `range` (`10.0.0.0/8`, `fd00::/8`).
    static func address(_ host: String, isIn range: String) -> Bool {
        let parts = range.split(separator: "/")
        guard parts.count == 2, let bits = Int(parts[1]), let network = bytes(of: String(parts[0])), let address = bytes(of: host),
              address.count == network.count, (0...network.count * 8).contains(bits) else { return false }
        for bit in 0..<bits where (address[bit / 8] ^ network[bit / 8]) & (0x80 >> UInt8(bit % 8)) != 0 { return false }
        return true
    }

    /// An IPv4 or IPv6 literal's bytes (4 or 16), or nil for a name.
    static func bytes(of literal: String) -> [UInt8]? {
        var v4 = in_addr(), v6 = in6_addr()
        if inet_pton(AF_INET, literal, &v4) == 1 { return withUnsafeBytes(of: &v4) { Array($0) } }
        if inet_pton(AF_INET6, literal, &v6) == 1 { return withUnsafeBytes(of: &v6) { Array($0) } }
        return nil
    }
}

extension HTTPClient {
    /// A connection to `host:port` on `loop` that carries what `pipeline` adds (TLS, HTTP):
    /// directly, or through `proxy`'s tunnel when one is given. A direct connection's
    /// failures are NIO's, for the caller to name; a tunnel's are `HTTPClientError`s.
    static func open(_ host: String, _ port: Int, through proxy: ClientProxy?, on loop: any EventLoop, deadline: NIODeadline,
                     pipeline: @escaping @Sendable (any Channel) throws -> Void) async throws -> any Channel {
        if let proxy { return try await proxy.tunnel(to: host, port: port, on: loop, deadline: deadline, pipeline: pipeline) }
        return try await ClientBootstrap(group: loop)
            .connectTimeout(max(.zero, deadline - NIODeadline.now()))
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in channel.eventLoop.makeCompletedFuture { try pipeline(channel) } }
            .connect(to: try address(host, port)).get()
    }
}

extension ClientProxy {
    /// A connection through this proxy to `host:port` that then carries what `pipeline`
    /// adds (TLS, HTTP), or throws `HTTPClientError.proxyRefused` when an HTTP proxy answers
    /// the CONNECT with another status, `.socksRefused` when a SOCKS5 proxy says no,
    /// `.timedOut` past `deadline`.
    func tunnel(to host: String, port: Int, on loop: any EventLoop, deadline: NIODeadline,
                pipeline: @escaping @Sendable (any Channel) throws -> Void) async throws -> any Channel {
        let established = loop.makePromise(of: Void.self)
        let channel: any Channel
        do {
            channel = try await HTTPClient.open(self.host, self.port, through: nil, on: loop, deadline: deadline) { [self] channel in
                switch kind {
                case .http:
                    try channel.pipeline.syncOperations.addHandler(
                        ProxyTunnel(target: HTTPClient.hostPort(host, port), authorization: authorization, established: established, pipeline: pipeline))
                case .socks5:
                    try channel.pipeline.syncOperations.addHandler(
                        SOCKSTunnel(host: host, port: port, user: user, password: password, established: established, pipeline: pipeline))
                }
            }
        } catch {
            // Nothing will answer the CONNECT: its promise ends here (an unkept promise is a
            // leak NIO traps on).
            let failure = if case ChannelError.connectTimeout = error {
                HTTPClientError.timedOut("connecting to proxy \(self)")
            } else {
                HTTPClientError.unreachable("proxy \(self): \(ConnectFailure.reason(error))")
            }
            established.fail(failure)
            throw failure
        }
        let timer = loop.scheduleTask(deadline: deadline) {
            established.fail(HTTPClientError.timedOut("proxy \(self): CONNECT \(host):\(port)"))
            channel.close(promise: nil)
        }
        defer { timer.cancel() }
        do {
            try await established.futureResult.get()
        } catch {
            channel.close(promise: nil)
            throw error
        }
        return channel
    }
}

/// What a tunnel's handshake does at either end, whatever the proxy speaks: the first
/// handler of the connection to the proxy gathers the proxy's answers in `answer`; once
/// the tunnel is open it puts the connection's own handlers after itself (`handOver`) and
/// leaves; a refusal, an error or a close fails `established`. Subclasses write their
/// requests and read the answers (`ProxyTunnel`, `SOCKSTunnel`).
class TunnelHandshake: ChannelInboundHandler, RemovableChannelHandler, @unchecked Sendable {
    // Unchecked: touched only on its channel's event loop.
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundOut = ByteBuffer

    let established: EventLoopPromise<Void>
    let pipeline: @Sendable (any Channel) throws -> Void
    var answer = ByteBuffer()

    init(established: EventLoopPromise<Void>, pipeline: @escaping @Sendable (any Channel) throws -> Void) {
        self.established = established
        self.pipeline = pipeline
    }

    /// Writes the first request (subclasses; a protocol's default would not dispatch to
    /// theirs).
    func channelActive(context: ChannelHandlerContext) {
        context.fireChannelActive()
    }

    /// Reads the proxy's answers (subclasses).
    func channelRead(context: ChannelHandlerContext, data: NIOAny) {}

    /// The tunnel is open: the connection's handlers go after this one, which leaves; bytes
    /// past the proxy's answer are the server's, for them.
    func handOver(_ context: ChannelHandlerContext) {
        do {
            try pipeline(context.channel)
        } catch {
            return fail(context, error)
        }
        established.succeed(())
        if answer.readableBytes > 0 { context.fireChannelRead(wrapInboundOut(answer)) }
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }

    func fail(_ context: ChannelHandlerContext, _ error: any Error) {
        established.fail(error)
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        established.fail(HTTPClientError.closed)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        fail(context, error)
    }
}

/// The handshake with an HTTP proxy: sends `CONNECT target`, reads the proxy's answer,
/// and on 2xx hands the connection over.
final class ProxyTunnel: TunnelHandshake, @unchecked Sendable {
    let target: String
    let authorization: String?
    /// A proxy's answer head is a status line and a few headers; more is not a proxy.
    static let headLimit = 16 * 1024

    init(target: String, authorization: String?, established: EventLoopPromise<Void>, pipeline: @escaping @Sendable (any Channel) throws -> Void) {
        self.target = target
        self.authorization = authorization
        super.init(established: established, pipeline: pipeline)
    }

    override func channelActive(context: ChannelHandlerContext) {
        var request = "CONNECT \(target) HTTP/1.1\r\nHost: \(target)\r\n"
        if let authorization { request += "Proxy-Authorization: \(authorization)\r\n" }
        request += "\r\n"
        context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(string: request)), promise: nil)
        context.fireChannelActive()
    }

    override func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = unwrapInboundIn(data)
        answer.writeBuffer(&bytes)
        let view = answer.readableBytesView
        guard let end = view.firstRange(of: [13, 10, 13, 10]) else {
            if answer.readableBytes > Self.headLimit { fail(context, HTTPClientError.proxyRefused(status: 0)) }
            return
        }
        // "HTTP/1.1 200 Connection established": the status is the second word.
        let statusLine = String(decoding: view[view.startIndex..<(view.firstIndex(of: 13) ?? end.lowerBound)], as: UTF8.self)
        let words = statusLine.split(separator: " ")
        let status = words.count > 1 ? Int(words[1]) ?? 0 : 0
        guard (200..<300).contains(status), statusLine.hasPrefix("HTTP/1.") else { return fail(context, HTTPClientError.proxyRefused(status: status)) }
        answer.moveReaderIndex(forwardBy: end.upperBound - view.startIndex)
        handOver(context)
    }
}
