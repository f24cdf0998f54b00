import NIOCore
import NIOPosix
import Synchronization

/// What the test proxies share (`ForwardProxy`, `SOCKSProxy`): a listener on a free
/// loopback port whose every connection starts with the handler `first` makes, and
/// counts of what they carried, so a test can tell traffic went through them.
public class LoopbackProxy: @unchecked Sendable {
    // Unchecked: the channel is set once in init and only closed after.
    public let port: Int
    let listener: any Channel
    let tally: Tally

    /// The counts, shared by the connections' handlers.
    final class Tally: Sendable {
        let counts = Mutex(Counts())
    }

    public struct Counts: Sendable, Equatable {
        /// Tunnels opened.
        public var tunnels = 0
        /// Requests forwarded in origin form (an HTTP proxy's).
        public var forwarded = 0
        /// Requests or handshakes refused for their credentials.
        public var refused = 0
        /// The `host:port` each tunnel and forwarded request went to, as asked for.
        public var destinations: Set<String> = []
    }

    init(first: @escaping @Sendable (Tally) -> any ChannelHandler) throws {
        let tally = Tally()
        self.tally = tally
        listener = try ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { inbound in
                inbound.eventLoop.makeCompletedFuture { try inbound.pipeline.syncOperations.addHandler(first(tally)) }
            }
            .bind(host: "127.0.0.1", port: 0).wait()
        port = listener.localAddress?.port ?? 0
    }

    /// Opens the tunnel a client asked for on `context`'s connection: connects to
    /// `host:port`, then counts it, splices the two connections (bytes both ways), answers
    /// `accepted`, passes on what the client sent early and takes the handshake's handler
    /// (`context`'s) out; a target that cannot be reached is answered `refused` and closed.
    static func tunnel(_ context: ChannelHandlerContext, to host: String, port: Int, asked: String, tally: Tally,
                       accepted: ByteBuffer, refused: ByteBuffer, early: @escaping () -> ByteBuffer) {
        let inbound = context.channel
        let bound = NIOLoopBound((context, early), eventLoop: context.eventLoop)
        ClientBootstrap(group: context.eventLoop).connect(host: host, port: port).whenComplete { result in
            let (context, early) = bound.value
            guard case .success(let outbound) = result else {
                context.writeAndFlush(NIOAny(refused)).whenComplete { _ in inbound.close(promise: nil) }
                return
            }
            tally.counts.withLock {
                $0.tunnels += 1
                $0.destinations.insert(asked)
            }
            let (front, back) = TLSProxy.Glue.pair()
            do {
                try outbound.pipeline.syncOperations.addHandler(back)
                try inbound.pipeline.syncOperations.addHandler(front)
            } catch {
                return inbound.close(promise: nil)
            }
            context.writeAndFlush(NIOAny(accepted), promise: nil)
            let pending = early()
            if pending.readableBytes > 0 { outbound.writeAndFlush(pending, promise: nil) }
            context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
        }
    }

    /// `scheme://127.0.0.1:PORT`, with `user:password@` when given.
    func url(_ scheme: String, credentials: String?) -> String { scheme + "://" + (credentials.map { $0 + "@" } ?? "") + "127.0.0.1:\(port)" }

    public var carried: Counts { tally.counts.withLock { $0 } }

    public func stop() { listener.close(promise: nil) }

    deinit { stop() }
}
