import HummingbirdCore
import LabKernel
import Logging
import NIOCore
import NIOHTTP1

/// Watches a connection until its first request head has arrived, then steps aside.
///
/// Theory of operation. Hummingbird's pipelines leave three gaps before the first request:
///
/// - A connection that never sends a complete request head holds its socket for good (no
///   idle timer runs until a request has been read), so a client that opens connections and
///   says nothing, or trickles a head byte by byte, can use up the server's file
///   descriptors. After `timeout` the guard answers `408` and closes.
/// - On the servers that can upgrade to WebSocket, a first request the HTTP parser refuses
///   (a TLS hello sent to a plain port, a method with a typo, a space in the path) was never
///   answered and never closed: NIO's upgrade handler waits for a head that cannot come.
///   The guard answers `400` with the parser's reason and closes, on every server alike.
/// - A first request whose `Upgrade` header names a protocol no server here takes (`h2c`,
///   as `curl --http2` asks) lost its head in NIO's upgrade handler, and got an empty
///   reply. The guard takes such protocols out of the head it passes on (`ignoreUpgrades`).
///
/// It sits right after the HTTP request decoder, so it sees the decoder's errors before
/// anything else and writes `HTTPServerResponsePart`s straight to the response encoder.
/// Closing, it first tells the handlers behind it that input ended, which is how NIO's
/// upgrade handler gives up quietly. The first request part it reads goes on as it came,
/// and the guard removes itself: later requests on the connection are Hummingbird's.
final class FirstRequestGuard: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart

    private let timeout: TimeAmount
    /// The 408's reason, written once: the timeout as `serve --header-timeout` spells it.
    private let lateReason: String
    private var timer: Scheduled<Void>?
    private var answered = false

    init(timeout: TimeAmount) {
        self.timeout = timeout
        lateReason = "request timeout: no request head within \(TimeSpan(nanoseconds: timeout.nanoseconds))"
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { arm(context) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
    }

    func channelActive(context: ChannelHandlerContext) {
        arm(context)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !answered else { return }
        if case .head(var head) = unwrapInboundIn(data), Self.ignoreUpgrades(of: &head) {
            context.fireChannelRead(wrapInboundOut(.head(head)))
        } else {
            context.fireChannelRead(data)
        }
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }

    /// Takes out of `head`'s `Upgrade` header every protocol but `websocket`, and all of
    /// them when the request has a body (a WebSocket handshake has none); true if it
    /// changed anything. A server may ignore an `Upgrade` it does not take (RFC 9110
    /// 7.8), and these must be: NIO's upgrade handler forwards such a request without its
    /// head (`curl --http2` asks for `h2c` and got an empty reply from the four WebSocket
    /// servers), and one with a body it neither answers nor closes.
    static func ignoreUpgrades(of head: inout HTTPRequestHead) -> Bool {
        let offered = head.headers[canonicalForm: "upgrade"]
        guard !offered.isEmpty else { return false }
        let hasBody = head.headers.contains(name: "transfer-encoding") || head.headers["content-length"].contains { $0 != "0" }
        let kept = hasBody ? [] : offered.filter { $0.lowercased() == "websocket" }
        guard kept.count != offered.count else { return false }
        head.headers.remove(name: "upgrade")
        if !kept.isEmpty { head.headers.add(name: "upgrade", value: "websocket") }
        return true
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard let parse = error as? HTTPParserError else { return context.fireErrorCaught(error) }
        answer(context, status: .badRequest, "bad request: not an HTTP/1.1 request (\(parse))")
    }

    private func arm(_ context: ChannelHandlerContext) {
        guard timer == nil, !answered else { return }
        timer = context.eventLoop.assumeIsolated().scheduleTask(in: timeout) { [self] in
            timer = nil
            answer(context, status: .requestTimeout, lateReason)
        }
    }

    private func answer(_ context: ChannelHandlerContext, status: HTTPResponseStatus, _ message: String) {
        guard !answered else { return }
        answered = true
        timer?.cancel()
        timer = nil
        var body = context.channel.allocator.buffer(capacity: message.utf8.count + 16)
        body.writeString(JSONValue.object(["error": .string(message)]).canonicalText)
        let headers = HTTPHeaders([("content-type", "application/json"), ("content-length", String(body.readableBytes)), ("connection", "close")])
        context.write(NIOAny(HTTPServerResponsePart.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers))), promise: nil)
        context.write(NIOAny(HTTPServerResponsePart.body(.byteBuffer(body))), promise: nil)
        let written = context.eventLoop.makePromise(of: Void.self)
        context.writeAndFlush(NIOAny(HTTPServerResponsePart.end(nil)), promise: written)
        written.futureResult.assumeIsolated().whenComplete { _ in
            context.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
            context.close(promise: nil)
        }
    }
}

/// A server's child channel with its first request guarded (`FirstRequestGuard`).
struct FirstRequestGuarded<Base: ServerChildChannel>: ServerChildChannel {
    let base: Base
    let timeout: TimeAmount

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Base.Value> {
        base.setup(channel: channel, logger: logger).flatMapThrowing { value in
            let pipeline = channel.pipeline.syncOperations
            let decoder = try pipeline.handler(type: ByteToMessageHandler<HTTPRequestDecoder>.self)
            try pipeline.addHandler(FirstRequestGuard(timeout: timeout), position: .after(decoder))
            return value
        }
    }

    func handle(value: Base.Value, logger: Logger) async {
        await base.handle(value: value, logger: logger)
    }
}
