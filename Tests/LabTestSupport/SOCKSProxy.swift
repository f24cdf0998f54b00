public import Foundation
import NIOCore
import NIOPosix
import Synchronization

/// A SOCKS5 proxy on loopback (RFC 1928's CONNECT, no authentication or RFC 1929's user
/// and password), as `ssh -D` opens one: bytes both ways once it has connected to the
/// target.
public final class SOCKSProxy: LoopbackProxy, @unchecked Sendable {
    /// `credentials`: `user:password` the proxy insists on, or nil for none.
    public init(credentials: String? = nil) throws {
        let expected = credentials.map { pair -> (String, String) in
            let parts = pair.split(separator: ":", maxSplits: 1)
            return (String(parts[0]), parts.count > 1 ? String(parts[1]) : "")
        }
        try super.init { tally in Handshake(expected: expected, tally: tally) }
    }

    /// `socks5://127.0.0.1:PORT`, with `user:password@` when given.
    public func url(credentials: String? = nil) -> String { url("socks5", credentials: credentials) }

    /// The server's side of the handshake, then the tunnel.
    final class Handshake: ChannelInboundHandler, RemovableChannelHandler, @unchecked Sendable {
        // Unchecked: touched only on its channel's event loop.
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer
        enum Stage { case greeting, credentials, request, connecting }
        let expected: (user: String, password: String)?
        let tally: Tally
        var stage = Stage.greeting
        var buffered = ByteBuffer()

        init(expected: (String, String)?, tally: Tally) {
            self.expected = expected
            self.tally = tally
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            var bytes = unwrapInboundIn(data)
            buffered.writeBuffer(&bytes)
            while stage != .connecting, let message = take() { handle(message, context: context) }
        }

        /// The next whole message of the current stage, or nil.
        func take() -> [UInt8]? {
            let view = Array(buffered.readableBytesView)
            let length: Int?
            switch stage {
            case .greeting: length = view.count >= 2 ? 2 + Int(view[1]) : nil
            case .credentials:
                guard view.count >= 2, view.count >= 2 + Int(view[1]) + 1 else { length = nil; break }
                length = 2 + Int(view[1]) + 1 + Int(view[2 + Int(view[1])])
            case .request:
                guard view.count >= 5 else { length = nil; break }
                switch view[3] {
                case 1: length = 4 + 4 + 2
                case 4: length = 4 + 16 + 2
                default: length = 4 + 1 + Int(view[4]) + 2
                }
            case .connecting: length = nil
            }
            guard let length, view.count >= length else { return nil }
            buffered.moveReaderIndex(forwardBy: length)
            return Array(view.prefix(length))
        }

        func handle(_ message: [UInt8], context: ChannelHandlerContext) {
            switch stage {
            case .greeting:
                let offered = Set(message.dropFirst(2))
                let method: UInt8 = expected == nil ? 0 : 2
                guard message[0] == 5, offered.contains(method) else {
                    tally.counts.withLock { $0.refused += 1 }
                    return reply([5, 0xFF], close: true, context: context)
                }
                stage = expected == nil ? .request : .credentials
                reply([5, method], close: false, context: context)
            case .credentials:
                let userLength = Int(message[1])
                let user = String(decoding: message[2..<(2 + userLength)], as: UTF8.self)
                let password = String(decoding: message[(3 + userLength)...], as: UTF8.self)
                guard let expected, user == expected.user, password == expected.password else {
                    tally.counts.withLock { $0.refused += 1 }
                    return reply([1, 1], close: true, context: context)
                }
                stage = .request
                reply([1, 0], close: false, context: context)
            case .request:
                stage = .connecting
                let port = Int(message[message.count - 2]) << 8 | Int(message[message.count - 1])
                let host: String
                switch message[3] {
                case 1: host = message[4..<8].map(String.init).joined(separator: ".")
                case 4: host = stride(from: 4, to: 20, by: 2).map { String(Int(message[$0]) << 8 | Int(message[$0 + 1]), radix: 16) }.joined(separator: ":")
                default: host = String(decoding: message[5..<(5 + Int(message[4]))], as: UTF8.self)
                }
                connect(host: host == "localhost" ? "127.0.0.1" : host, asked: "\(host):\(port)", port: port, context: context)
            case .connecting:
                break
            }
        }

        func connect(host: String, asked: String, port: Int, context: ChannelHandlerContext) {
            let allocator = context.channel.allocator
            LoopbackProxy.tunnel(context, to: host, port: port, asked: asked, tally: tally,
                                 accepted: allocator.buffer(bytes: [5, 0, 0, 1, 127, 0, 0, 1, 0, 0]),
                                 refused: allocator.buffer(bytes: [5, 5, 0, 1, 0, 0, 0, 0, 0, 0]), early: { self.buffered })
        }

        func reply(_ bytes: [UInt8], close: Bool, context: ChannelHandlerContext) {
            let channel = context.channel
            let written = context.writeAndFlush(NIOAny(channel.allocator.buffer(bytes: bytes)))
            if close { written.whenComplete { _ in channel.close(promise: nil) } }
        }
    }
}
