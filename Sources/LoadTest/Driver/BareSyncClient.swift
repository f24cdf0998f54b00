import Foundation
public import LabKernel
import NIOCore
import NIOHTTP1
import NIOPosix
import Simulator

/// The reference row of `fleetlab bench loadtest`: the bench's sync requests from the
/// leanest client NIO allows, so the bench can say how much of a request's CPU is the
/// socket path every NIO generator pays, and how much is fleetlab's phone.
///
/// Theory of operation: one event loop, one keep-alive connection per user, one handler
/// per connection that registers its device, then writes the same sync body every
/// `think` (constant, as the bench's Locust user waits). Nothing else runs: no Swift
/// concurrency, no engine, no JSON, no latency recording, no deadline timer. What it
/// measures is requests answered per CPU-second of its own process.
public enum BareSyncClient {
    public struct Figures: Sendable {
        public var requests: Int
        public var failures: Int
        public var cpuSeconds: Double
        public var wallSeconds: Double
    }

    /// Runs `users` connections against `baseURL` (`http://host:port`) for `duration`.
    public static func run(baseURL: String, apiKey: String, users: Int, think: TimeSpan, duration: TimeSpan) throws -> Figures {
        guard let url = URL(string: baseURL), url.scheme == "http", let host = url.host, let port = url.port else {
            throw InvalidTarget(url: baseURL)
        }
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        defer { try? group.syncShutdownGracefully() }
        let loop = group.next()
        let tally = Tally()
        let startCPU = WallClock.cpuSeconds(), start = NIODeadline.now()
        let end = start + .nanoseconds(duration.nanoseconds)
        var channels: [any Channel] = []
        for user in 0..<users {
            let phone = BarePhone(host: "\(host):\(port)", apiKey: apiKey, device: "bare-\(getpid())-\(user)",
                                  think: .nanoseconds(think.nanoseconds), end: end, tally: tally)
            let channel = try ClientBootstrap(group: loop)
                .channelOption(.socketOption(.tcp_nodelay), value: 1)
                .connectTimeout(.seconds(5))
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHTTPClientHandlers()
                        try channel.pipeline.syncOperations.addHandler(phone)
                    }
                }
                .connect(host: host, port: port).wait()
            channels.append(channel)
        }
        // Every connection closes itself at `end`; a server that stops answering is bounded
        // by the same deadline plus a grace.
        let closed = EventLoopFuture.andAllComplete(channels.map(\.closeFuture), on: loop)
        let grace = loop.scheduleTask(deadline: end + .seconds(5)) { for channel in channels { channel.close(promise: nil) } }
        try closed.wait()
        grace.cancel()
        let counts = try loop.submit { (tally.requests, tally.failures) }.wait()
        return Figures(requests: counts.0, failures: counts.1, cpuSeconds: WallClock.cpuSeconds() - startCPU,
                       wallSeconds: Double((NIODeadline.now() - start).nanoseconds) / 1e9)
    }

    /// The target is not `http://host:port`.
    public struct InvalidTarget: Error, CustomStringConvertible {
        public var url: String
        public var description: String { "expected http://host:port, got \(url)" }
    }

    /// Counts shared by the connections, touched only on their one event loop.
    final class Tally: @unchecked Sendable {
        var requests = 0
        var failures = 0
    }
}

/// One user: registers, then syncs every `think` until `end`, then closes.
private final class BarePhone: ChannelInboundHandler, @unchecked Sendable {
    // Unchecked: touched only on its channel's event loop.
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundOut = HTTPClientRequestPart

    let headers: HTTPHeaders
    let register: ByteBuffer
    let sync: ByteBuffer
    let think: TimeAmount
    let end: NIODeadline
    let tally: BareSyncClient.Tally
    var registered = false
    var status: HTTPResponseStatus = .ok

    init(host: String, apiKey: String, device: String, think: TimeAmount, end: NIODeadline, tally: BareSyncClient.Tally) {
        headers = HTTPHeaders([("host", host), ("x-api-key", apiKey), ("x-device-id", device), ("content-type", "application/json")])
        register = ByteBuffer(string: #"{"device_id":"\#(device)","platform":"android","app_version":"bare-nio"}"#)
        sync = ByteBuffer(string: #"{"device_id":"\#(device)","status_updates":[],"approval_requests":[],"step_delegations":[],"command_acks":[]}"#)
        self.think = think
        self.end = end
        self.tally = tally
    }

    func channelActive(context: ChannelHandlerContext) {
        send(register, to: "/api/v1/mobile/devices/register", context: context)
    }

    func send(_ body: ByteBuffer, to path: String, context: ChannelHandlerContext) {
        var head = HTTPRequestHead(version: .http1_1, method: .POST, uri: path, headers: headers)
        head.headers.add(name: "content-length", value: String(body.readableBytes))
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head): status = head.status
        case .body: break
        case .end:
            tally.requests += 1
            if !(registered ? status == .ok : status == .created) { tally.failures += 1 }
            registered = true
            guard NIODeadline.now() + think < end else {
                context.close(promise: nil)
                return
            }
            let loop = context.eventLoop.assumeIsolatedUnsafeUnchecked()
            let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
            loop.scheduleTask(in: think) { [self] in self.send(sync, to: "/api/v1/mobile/sync", context: bound.value) }
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        tally.failures += 1
        context.close(promise: nil)
    }
}
