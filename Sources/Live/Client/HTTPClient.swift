import Foundation
public import LabKernel
public import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// A small HTTP/1.1 client on SwiftNIO for the live drivers: keep-alive connections per
/// host, one request at a time on each, and a deadline on every exchange (connecting
/// included). A request that misses its deadline closes its connection and throws
/// `HTTPClientError.timedOut`; nothing waits forever.
///
/// Requests and answers are the cores' own `HTTPRequestMessage` and `HTTPResponseMessage`,
/// so a client core's effects go on the wire as they are. Plain `http://` only: the
/// reference servers run on loopback (TLS would bring BoringSSL's build time).
public final class HTTPClient: Sendable {
    let group: any EventLoopGroup
    /// Idle connections by `host:port`, ready for their next request.
    let idle = Mutex<[String: [any Channel]]>([:])
    /// Idle connections kept per host at most.
    let idlePerHost: Int

    public convenience init(idlePerHost: Int = 8) { self.init(group: MultiThreadedEventLoopGroup.singleton, idlePerHost: idlePerHost) }

    public init(group: any EventLoopGroup, idlePerHost: Int = 8) {
        self.group = group
        self.idlePerHost = idlePerHost
    }

    /// Sends `request` to the server at `baseURL` (`http://host:port`), its `path` and
    /// `query` as the target; throws on a transport failure or after `timeout`.
    public func send(_ request: HTTPRequestMessage, to baseURL: String, timeout: Duration = .seconds(10)) async throws -> HTTPResponseMessage {
        guard let url = URL(string: baseURL), url.scheme == "http", let host = url.host else { throw HTTPClientError.badURL(baseURL) }
        let port = url.port ?? 80
        let key = "\(host):\(port)"
        let deadline = NIODeadline.now() + TimeAmount(timeout)
        let channel = try await connection(key: key, host: host, port: port, deadline: deadline)
        let handler = try await channel.pipeline.handler(type: HTTPExchangeHandler.self).get()
        let promise = channel.eventLoop.makePromise(of: HTTPResponseMessage.self)
        let timer = channel.eventLoop.scheduleTask(deadline: deadline) {
            promise.fail(HTTPClientError.timedOut(baseURL + request.path))
            channel.close(promise: nil)
        }
        channel.eventLoop.execute { handler.expect(promise) }
        var headers = HTTPHeaders()
        headers.add(name: "Host", value: key)
        for (name, value) in request.headers.sorted(by: { $0.key < $1.key }) where name != "host" && name != "content-length" {
            headers.add(name: name, value: value)
        }
        headers.add(name: "Content-Length", value: String(request.body.count))
        let target = request.path + (request.query.isEmpty ? "" : "?" + request.query.sorted { $0.key < $1.key }
            .map { PercentEncoding.encode($0.key) + "=" + PercentEncoding.encode($0.value) }.joined(separator: "&"))
        let head = HTTPRequestHead(version: .http1_1, method: HTTPMethod(rawValue: request.method), uri: target, headers: headers)
        channel.write(HTTPClientRequestPart.head(head), promise: nil)
        if !request.body.isEmpty { channel.write(HTTPClientRequestPart.body(.byteBuffer(ByteBuffer(bytes: request.body))), promise: nil) }
        channel.writeAndFlush(HTTPClientRequestPart.end(nil), promise: nil)
        do {
            let response = try await promise.futureResult.get()
            timer.cancel()
            release(channel, key: key, reusable: response.header("connection")?.lowercased() != "close")
            return response
        } catch {
            timer.cancel()
            channel.close(promise: nil)
            throw error
        }
    }

    /// An idle connection to `key`, or a new one.
    func connection(key: String, host: String, port: Int, deadline: NIODeadline) async throws -> any Channel {
        // A connection on the calling thread's event loop first: a task running on that loop
        // (a load test's phones do) then sends and resumes without a thread hop.
        while let reused = idle.withLock({ pool -> (any Channel)? in
            guard var channels = pool[key], !channels.isEmpty else { return nil }
            let index = channels.lastIndex { $0.eventLoop.inEventLoop } ?? channels.index(before: channels.endIndex)
            let channel = channels.remove(at: index)
            pool[key] = channels
            return channel
        }) {
            if reused.isActive { return reused }
        }
        let remaining = deadline - NIODeadline.now()
        guard remaining > .zero else { throw HTTPClientError.timedOut("connecting to \(key)") }
        do {
            // `any()` is the calling thread's loop when it is one of the group's.
            return try await ClientBootstrap(group: group.any())
                .connectTimeout(remaining)
                .channelOption(.socketOption(.tcp_nodelay), value: 1)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHTTPClientHandlers()
                        try channel.pipeline.syncOperations.addHandler(HTTPExchangeHandler())
                    }
                }
                .connect(to: try Self.address(host, port)).get()
        } catch ChannelError.connectTimeout {
            throw HTTPClientError.timedOut("connecting to \(key)")
        } catch {
            throw HTTPClientError.unreachable("\(key): \(error)")
        }
    }

    /// The address to connect to. An IP literal (the usual case: loopback) is used as it
    /// is; NIO's `connect(host:port:)` would resolve even that with `getaddrinfo` on
    /// Dispatch's global queue, which busy work elsewhere in the process can hold up for
    /// seconds. A name is resolved here, on the caller's thread.
    static func address(_ host: String, _ port: Int) throws -> SocketAddress {
        if let literal = try? SocketAddress(ipAddress: host, port: port) { return literal }
        return try SocketAddress.makeAddressResolvingHost(host, port: port)
    }

    func release(_ channel: any Channel, key: String, reusable: Bool) {
        guard reusable, channel.isActive else {
            channel.close(promise: nil)
            return
        }
        let kept = idle.withLock { pool -> Bool in
            guard pool[key, default: []].count < idlePerHost else { return false }
            pool[key, default: []].append(channel)
            return true
        }
        if !kept { channel.close(promise: nil) }
    }

    /// Closes every idle connection.
    public func shutdown() {
        let all = idle.withLock { pool -> [any Channel] in
            defer { pool.removeAll() }
            return pool.values.flatMap { $0 }
        }
        for channel in all { channel.close(promise: nil) }
    }

    deinit { shutdown() }
}

public enum HTTPClientError: Error, CustomStringConvertible, Equatable {
    case badURL(String)
    case unreachable(String)
    case timedOut(String)
    /// The connection closed before a whole answer arrived.
    case closed

    public var description: String {
        switch self {
        case .badURL(let url): return "not an http://host:port URL: \(url)"
        case .unreachable(let what): return "cannot connect to \(what)"
        case .timedOut(let what): return "no answer in time: \(what)"
        case .closed: return "the connection closed before the answer was complete"
        }
    }
}

/// Collects one response at a time on a keep-alive connection.
final class HTTPExchangeHandler: ChannelInboundHandler, @unchecked Sendable {
    // Unchecked: touched only on its channel's event loop.
    typealias InboundIn = HTTPClientResponsePart

    var promise: EventLoopPromise<HTTPResponseMessage>?
    var response = HTTPResponseMessage(status: 0)

    func expect(_ promise: EventLoopPromise<HTTPResponseMessage>) {
        self.promise = promise
        response = HTTPResponseMessage(status: 0)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            response.status = Int(head.status.code)
            response.headers = head.headers.map { HTTPHeader($0.name, $0.value) }
        case .body(let buffer):
            response.body += buffer.readableBytesView
        case .end:
            let done = promise
            promise = nil
            done?.succeed(response)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        promise?.fail(HTTPClientError.closed)
        promise = nil
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        promise?.fail(error)
        promise = nil
        context.close(promise: nil)
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
    /// This client's requests to the server at `baseURL`.
    public func transport(to baseURL: String) -> some HTTPTransport { Target(client: self, baseURL: baseURL) }

    struct Target: HTTPTransport {
        let client: HTTPClient
        let baseURL: String

        func send(_ request: HTTPRequestMessage, timeout: Duration) async throws -> HTTPResponseMessage {
            try await client.send(request, to: baseURL, timeout: timeout)
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
