import NIOCore

/// The first handler of a connection to a SOCKS5 proxy (RFC 1928): offers the one method
/// it can use (none, or a user and password, RFC 1929, when the proxy's URL has them),
/// asks the proxy to connect to the target, by address for an IP literal and by name
/// otherwise (the proxy resolves it), and once the proxy has, puts the connection's own
/// handlers after it and leaves.
///
/// Theory of operation: three exchanges in order, each a short message out and a short
/// answer in. Bytes are gathered until the stage's answer is whole; anything after the
/// last answer is already the server's and goes on to the handlers that take over.
final class SOCKSTunnel: TunnelHandshake, @unchecked Sendable {
    private enum Stage {
        case greeting
        case authenticating
        case connecting
        case done
    }

    static let noAuthentication: UInt8 = 0x00
    static let userPassword: UInt8 = 0x02

    let request: [UInt8]
    let credentials: [UInt8]?
    private var stage = Stage.greeting

    init(host: String, port: Int, user: String?, password: String?, established: EventLoopPromise<Void>,
         pipeline: @escaping @Sendable (any Channel) throws -> Void) {
        // CONNECT: version, command, reserved, the address, the port (big-endian).
        var request: [UInt8] = [5, 1, 0]
        if let address = ProxyRoutes.bytes(of: host) {
            request.append(address.count == 4 ? 0x01 : 0x04)
            request += address
        } else {
            let name = Array(host.utf8.prefix(255))
            request += [0x03, UInt8(name.count)] + name
        }
        request += [UInt8(port >> 8 & 0xFF), UInt8(port & 0xFF)]
        self.request = request
        credentials = user.map { user in
            let name = Array(user.utf8), secret = Array((password ?? "").utf8)
            return [1, UInt8(name.count)] + name + [UInt8(secret.count)] + secret
        }
        super.init(established: established, pipeline: pipeline)
    }

    override func channelActive(context: ChannelHandlerContext) {
        send([5, 1, credentials == nil ? Self.noAuthentication : Self.userPassword], context)
        context.fireChannelActive()
    }

    override func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = unwrapInboundIn(data)
        answer.writeBuffer(&bytes)
        while let step = nextAnswer() {
            switch step {
            case .failure(let error): return fail(context, error)
            case .success(let stage): self.stage = stage
            }
            switch stage {
            case .greeting: break
            case .authenticating: send(credentials ?? [], context)
            case .connecting: send(request, context)
            case .done: return handOver(context)
            }
        }
    }

    /// The stage after the answer now gathered, nil while it is incomplete, or why the
    /// proxy refused.
    private func nextAnswer() -> Result<Stage, HTTPClientError>? {
        let view = answer.readableBytesView
        let bytes = Array(view.prefix(5))
        switch stage {
        case .greeting:
            guard bytes.count >= 2 else { return nil }
            answer.moveReaderIndex(forwardBy: 2)
            guard bytes[0] == 5 else { return .failure(.socksRefused("not a SOCKS5 answer")) }
            if bytes[1] == Self.noAuthentication, credentials == nil { return .success(.connecting) }
            if bytes[1] == Self.userPassword, credentials != nil { return .success(.authenticating) }
            return .failure(.socksRefused(credentials == nil ? "it asks for a user and password" : "no acceptable authentication"))
        case .authenticating:
            guard bytes.count >= 2 else { return nil }
            answer.moveReaderIndex(forwardBy: 2)
            return bytes[1] == 0 ? .success(.connecting) : .failure(.socksRefused("user or password refused"))
        case .connecting:
            // Version, reply, reserved, address type, the bound address, its port.
            guard bytes.count >= 5 else { return nil }
            guard bytes[0] == 5 else { return .failure(.socksRefused("not a SOCKS5 answer")) }
            guard bytes[1] == 0 else { return .failure(.socksRefused(Self.reply(bytes[1]))) }
            let address: Int
            switch bytes[3] {
            case 0x01: address = 4
            case 0x04: address = 16
            case 0x03: address = 1 + Int(bytes[4])
            default: return .failure(.socksRefused("not a SOCKS5 answer"))
            }
            guard view.count >= 4 + address + 2 else { return nil }
            answer.moveReaderIndex(forwardBy: 4 + address + 2)
            return .success(.done)
        case .done:
            return nil
        }
    }

    /// RFC 1928's replies, as a load test's summary names them.
    static func reply(_ code: UInt8) -> String {
        switch code {
        case 1: "general failure"
        case 2: "not allowed by its rules"
        case 3: "network unreachable"
        case 4: "host unreachable"
        case 5: "connection refused"
        case 6: "TTL expired"
        case 7: "command not supported"
        case 8: "address type not supported"
        default: "reply \(code)"
        }
    }

    private func send(_ bytes: [UInt8], _ context: ChannelHandlerContext) {
        context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(bytes: bytes)), promise: nil)
    }
}
