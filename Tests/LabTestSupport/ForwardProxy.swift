public import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// A forward HTTP proxy on loopback, as a corporate network puts between a load generator
/// and a staging deployment: `CONNECT host:port` opens a tunnel (answered 200, then bytes
/// both ways), and a request in absolute form (`POST http://host:port/path`) is forwarded
/// in origin form on a connection of its own to that server. With `credentials` set, a
/// request without that `Proxy-Authorization: Basic` is answered 407.
public final class ForwardProxy: LoopbackProxy, @unchecked Sendable {
    /// `credentials`: `user:password` the proxy insists on, or nil for none.
    public init(credentials: String? = nil) throws {
        let expected = credentials.map { "Basic " + Data($0.utf8).base64EncodedString() }
        try super.init { tally in Sniffer(expected: expected, tally: tally) }
    }

    /// `http://127.0.0.1:PORT`, with `user:password@` when given.
    public func url(credentials: String? = nil) -> String { url("http", credentials: credentials) }

    /// Reads a connection's first request head and decides: tunnel, forward, or 407.
    final class Sniffer: ChannelInboundHandler, RemovableChannelHandler, @unchecked Sendable {
        // Unchecked: touched only on its channel's event loop.
        typealias InboundIn = ByteBuffer
        typealias InboundOut = ByteBuffer
        let expected: String?
        let tally: Tally
        var buffered = ByteBuffer()
        /// The head is read and a tunnel is being opened: later bytes wait for it.
        var decided = false

        init(expected: String?, tally: Tally) {
            self.expected = expected
            self.tally = tally
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            var bytes = unwrapInboundIn(data)
            buffered.writeBuffer(&bytes)
            guard !decided else { return }
            let view = buffered.readableBytesView
            guard let end = view.firstRange(of: [13, 10, 13, 10]) else { return }
            let head = String(decoding: view[view.startIndex..<end.lowerBound], as: UTF8.self)
            let lines = head.components(separatedBy: "\r\n")
            let words = lines[0].split(separator: " ").map(String.init)
            let authorization = lines.dropFirst().first { $0.lowercased().hasPrefix("proxy-authorization:") }
                .map { $0.dropFirst("proxy-authorization:".count).trimmingCharacters(in: .whitespaces) }
            guard words.count == 3 else { return context.close(promise: nil) }
            decided = true
            if let expected, authorization != expected {
                tally.counts.withLock { $0.refused += 1 }
                let answer = "HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm=\"test\"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                let channel = context.channel
                context.writeAndFlush(NIOAny(channel.allocator.buffer(string: answer))).whenComplete { _ in channel.close(promise: nil) }
                return
            }
            if words[0] == "CONNECT" {
                tunnel(to: words[1], context: context, after: end.upperBound - view.startIndex)
            } else {
                forward(context: context)
            }
        }

        func tunnel(to destination: String, context: ChannelHandlerContext, after headLength: Int) {
            let parts = destination.split(separator: ":")
            guard parts.count == 2, let port = Int(parts[1]) else { return context.close(promise: nil) }
            buffered.moveReaderIndex(forwardBy: headLength)
            let allocator = context.channel.allocator
            LoopbackProxy.tunnel(context, to: String(parts[0]), port: port, asked: destination, tally: tally,
                                 accepted: allocator.buffer(string: "HTTP/1.1 200 Connection established\r\n\r\n"),
                                 refused: allocator.buffer(string: "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"),
                                 early: { self.buffered })
        }

        /// Absolute-form requests: HTTP codecs after this handler, the head read again
        /// through them.
        func forward(context: ChannelHandlerContext) {
            do {
                try context.pipeline.syncOperations.addHandler(ByteToMessageHandler(HTTPRequestDecoder()), position: .after(self))
                let decoder = try context.pipeline.syncOperations.handler(type: ByteToMessageHandler<HTTPRequestDecoder>.self)
                try context.pipeline.syncOperations.addHandler(HTTPResponseEncoder(), position: .after(decoder))
                try context.pipeline.syncOperations.addHandler(Forwarder(tally: tally))
            } catch {
                return context.close(promise: nil)
            }
            context.fireChannelRead(wrapInboundOut(buffered))
            context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
        }
    }

    /// Forwards each request to the server its absolute URI names, on one connection per
    /// client connection, and the answers back.
    final class Forwarder: ChannelInboundHandler, @unchecked Sendable {
        // Unchecked: touched only on its channel's event loop.
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart
        let tally: Tally
        var upstream: (any Channel)?
        var waiting: [HTTPClientRequestPart] = []
        var connecting = false

        init(tally: Tally) { self.tally = tally }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case .head(var head):
                guard let url = URL(string: head.uri), let host = url.host, let port = url.port else { return context.close(promise: nil) }
                head.uri = url.path + (url.query.map { "?" + $0 } ?? "")
                head.headers.remove(name: "Proxy-Authorization")
                tally.counts.withLock {
                    $0.forwarded += 1
                    $0.destinations.insert("\(host):\(port)")
                }
                send(.head(head), context: context, host: host, port: port)
            case .body(let body): send(.body(.byteBuffer(body)), context: context, host: nil, port: nil)
            case .end(let trailers): send(.end(trailers), context: context, host: nil, port: nil)
            }
        }

        func send(_ part: HTTPClientRequestPart, context: ChannelHandlerContext, host: String?, port: Int?) {
            if let upstream {
                if case .end = part { upstream.writeAndFlush(part, promise: nil) } else { upstream.write(part, promise: nil) }
                return
            }
            waiting.append(part)
            guard !connecting, let host, let port else { return }
            connecting = true
            let inbound = context.channel
            let loopBound = NIOLoopBound(self, eventLoop: context.eventLoop)
            ClientBootstrap(group: context.eventLoop)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHTTPClientHandlers()
                        try channel.pipeline.syncOperations.addHandler(Backflow(inbound: inbound))
                    }
                }
                .connect(host: host, port: port).whenComplete { result in
                    let forwarder = loopBound.value
                    guard case .success(let channel) = result else { return inbound.close(promise: nil) }
                    forwarder.upstream = channel
                    for part in forwarder.waiting { channel.write(part, promise: nil) }
                    channel.flush()
                    forwarder.waiting = []
                }
        }

        func channelInactive(context: ChannelHandlerContext) {
            upstream?.close(promise: nil)
            context.fireChannelInactive()
        }
    }

    /// A server's answers, written back to the client's connection.
    final class Backflow: ChannelInboundHandler, @unchecked Sendable {
        // Unchecked: touched only on its channel's event loop (the client's, too).
        typealias InboundIn = HTTPClientResponsePart
        let inbound: any Channel

        init(inbound: any Channel) { self.inbound = inbound }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case .head(let head): inbound.write(HTTPServerResponsePart.head(HTTPResponseHead(version: head.version, status: head.status, headers: head.headers)),
                                                promise: nil)
            case .body(let body): inbound.write(HTTPServerResponsePart.body(.byteBuffer(body)), promise: nil)
            case .end(let trailers): inbound.writeAndFlush(HTTPServerResponsePart.end(trailers), promise: nil)
            }
        }

        func channelInactive(context: ChannelHandlerContext) {
            inbound.close(promise: nil)
            context.fireChannelInactive()
        }
    }
}
