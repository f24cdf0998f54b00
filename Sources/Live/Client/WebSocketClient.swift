public import NIOCore
import NIOHTTP1
import NIOPosix
import NIOWebSocket

/// A small WebSocket client on SwiftNIO for the live drivers (the agent runtime's
/// phones, bench and load-test clients): plain `ws://` on loopback, `wss://` with `tls`,
/// either through a proxy's tunnel (`ClientProxy`); one upgrade with a deadline, text
/// frames out (masked, as a client must) and in, pings answered, a close echoed. What
/// arrives is an `AsyncStream` of events that ends when the socket does.
public final class WebSocketConnection: Sendable {
    public enum Event: Sendable, Equatable {
        case text(String)
        /// The socket closed: the peer's close code (1006 when it just went away).
        case closed(UInt16)
    }

    public let events: AsyncStream<Event>
    let channel: any Channel

    init(channel: any Channel, events: AsyncStream<Event>) {
        self.channel = channel
        self.events = events
    }

    /// Sends a text frame (written in order; a closed socket drops it).
    public func send(_ text: String) {
        var buffer = channel.allocator.buffer(capacity: text.utf8.count)
        buffer.writeString(text)
        let frame = WebSocketFrame(fin: true, opcode: .text, maskKey: .random(), data: buffer)
        channel.writeAndFlush(frame, promise: nil)
    }

    /// Closes with `code` (the events end once the socket is gone).
    public func close(code: UInt16 = 1000) {
        var buffer = channel.allocator.buffer(capacity: 2)
        buffer.writeInteger(code)
        let frame = WebSocketFrame(fin: true, opcode: .connectionClose, maskKey: .random(), data: buffer)
        channel.writeAndFlush(frame).whenComplete { [channel] _ in channel.close(promise: nil) }
    }
}

public enum WebSocketClientError: Error, CustomStringConvertible, Equatable {
    case badURL(String)
    case unreachable(String)
    case timedOut(String)
    /// The server answered the upgrade with an HTTP status instead of 101.
    case refused(status: Int)

    public var description: String {
        switch self {
        case .badURL(let url): return "not a ws://host:port URL: \(url)"
        case .unreachable(let what): return "cannot connect to \(what)"
        case .timedOut(let what): return "no upgrade in time: \(what)"
        case .refused(let status): return "the server refused the WebSocket upgrade (HTTP \(status))"
        }
    }
}

public enum WebSocketClient {
    /// Opens `target` (path and query) on `host:port`, over TLS (`wss://`) when `tls` is
    /// given; throws when the server refuses the upgrade or nothing answers within `timeout`.
    public static func connect(host: String, port: Int, target: String, timeout: Duration = .seconds(10), tls: ClientTLS? = nil,
                               proxy: ClientProxy? = nil) async throws -> WebSocketConnection {
        try await connect(host: host, port: port, target: target, timeout: timeout, group: MultiThreadedEventLoopGroup.singleton, tls: tls, proxy: proxy)
    }

    /// Through `proxy` when given: a tunnel to `host:port` it opens (`CONNECT`), then the
    /// same upgrade.
    public static func connect(host: String, port: Int, target: String, timeout: Duration,
                               group: any EventLoopGroup, tls: ClientTLS? = nil, proxy: ClientProxy? = nil) async throws -> WebSocketConnection {
        let (events, continuation) = AsyncStream<WebSocketConnection.Event>.makeStream()
        let loop = group.any()
        let upgraded = loop.makePromise(of: Void.self)
        let frames = FrameHandler(continuation: continuation)
        let watcher = UpgradeWatcher(promise: upgraded)
        let upgrader = NIOWebSocketClientUpgrader(maxFrameSize: 1 << 20) { channel, _ in
            channel.eventLoop.makeCompletedFuture {
                _ = channel.pipeline.syncOperations.removeHandler(watcher)
                try channel.pipeline.syncOperations.addHandler(frames)
            }
        }
        let deadline = NIODeadline.now() + TimeAmount(timeout)
        let handlers: @Sendable (any Channel) throws -> Void = { channel in
            if let tls { try channel.pipeline.syncOperations.addHandler(tls.handler(host: host)) }
            // Frames that come in the same read as the 101 go on to the frame decoder.
            try channel.pipeline.syncOperations.addHTTPClientHandlers(leftOverBytesStrategy: .forwardBytes,
                                                                      withClientUpgrade: (upgraders: [upgrader], completionHandler: { _ in
                upgraded.succeed(())
            }))
            try channel.pipeline.syncOperations.addHandler(watcher)
        }
        let channel: any Channel
        do {
            channel = try await HTTPClient.open(host, port, through: proxy, on: loop, deadline: deadline, pipeline: handlers)
        } catch {
            // Nothing will answer the upgrade: its promise ends here (an unkept promise is a
            // leak NIO traps on).
            let failure: any Error = switch error {
            case ChannelError.connectTimeout: WebSocketClientError.timedOut("connecting to \(host):\(port)")
            // The proxy's own answer is the reason (HTTPClientError: reached, refused, timed out).
            case let proxied as HTTPClientError: proxied
            default: WebSocketClientError.unreachable("\(host):\(port): \(ConnectFailure.reason(error))")
            }
            upgraded.fail(failure)
            throw failure
        }
        let timer = loop.scheduleTask(deadline: deadline) {
            upgraded.fail(WebSocketClientError.timedOut("\(host):\(port)\(target)"))
            channel.close(promise: nil)
        }
        var headers = HTTPHeaders()
        headers.add(name: "Host", value: HTTPClient.authority(host, port, secure: tls != nil))
        headers.add(name: "Content-Length", value: "0")
        let head = HTTPRequestHead(version: .http1_1, method: .GET, uri: target, headers: headers)
        channel.write(HTTPClientRequestPart.head(head), promise: nil)
        channel.writeAndFlush(HTTPClientRequestPart.end(nil), promise: nil)
        do {
            try await upgraded.futureResult.get()
            timer.cancel()
        } catch {
            timer.cancel()
            channel.close(promise: nil)
            continuation.finish()
            throw error
        }
        return WebSocketConnection(channel: channel, events: events)
    }

    /// Fails the upgrade when the server answers with a plain HTTP response instead.
    final class UpgradeWatcher: ChannelInboundHandler, RemovableChannelHandler, @unchecked Sendable {
        // Unchecked: touched only on its channel's event loop.
        typealias InboundIn = HTTPClientResponsePart
        let promise: EventLoopPromise<Void>

        init(promise: EventLoopPromise<Void>) { self.promise = promise }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            if case .head(let head) = unwrapInboundIn(data) {
                promise.fail(WebSocketClientError.refused(status: Int(head.status.code)))
                context.close(promise: nil)
            }
        }

        func channelInactive(context: ChannelHandlerContext) {
            promise.fail(WebSocketClientError.unreachable("the connection closed during the upgrade"))
            context.fireChannelInactive()
        }
    }

    /// Text frames (reassembled from fragments) and closes into the event stream; pings
    /// answered with pongs, a close echoed.
    final class FrameHandler: ChannelInboundHandler, @unchecked Sendable {
        // Unchecked: touched only on its channel's event loop.
        typealias InboundIn = WebSocketFrame
        typealias OutboundOut = WebSocketFrame
        let continuation: AsyncStream<WebSocketConnection.Event>.Continuation
        var partial: [UInt8]?
        var closeCode: UInt16 = 1006

        init(continuation: AsyncStream<WebSocketConnection.Event>.Continuation) { self.continuation = continuation }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let frame = unwrapInboundIn(data)
            var payload = frame.unmaskedData
            switch frame.opcode {
            case .text:
                partial = Array(payload.readableBytesView)
                if frame.fin { deliver() }
            case .continuation:
                partial? += payload.readableBytesView
                if frame.fin { deliver() }
            case .ping:
                let pong = WebSocketFrame(fin: true, opcode: .pong, maskKey: .random(), data: payload)
                context.writeAndFlush(wrapOutboundOut(pong), promise: nil)
            case .connectionClose:
                closeCode = payload.readInteger(as: UInt16.self) ?? 1005
                var echo = context.channel.allocator.buffer(capacity: 2)
                echo.writeInteger(closeCode)
                let reply = WebSocketFrame(fin: true, opcode: .connectionClose, maskKey: .random(), data: echo)
                context.writeAndFlush(wrapOutboundOut(reply)).whenComplete { _ in context.close(promise: nil) }
            default:
                break
            }
        }

        func deliver() {
            if let bytes = partial { continuation.yield(.text(String(decoding: bytes, as: UTF8.self))) }
            partial = nil
        }

        func channelInactive(context: ChannelHandlerContext) {
            continuation.yield(.closed(closeCode))
            continuation.finish()
            context.fireChannelInactive()
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) { context.close(promise: nil) }
    }
}
