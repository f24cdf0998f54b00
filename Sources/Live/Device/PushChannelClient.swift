import Foundation
public import LabKernel
public import NIOCore
import NIOHTTP1
import NIOPosix

/// A device's end of the sync server's development push channel: one HTTP/1.1 GET of
/// `/api/v1/mobile/push/stream?device_id=` kept open, read as Server-Sent Events; each
/// `wake` event calls `onWake` with its JSON (`command_id`, and `orch8` metadata when a
/// real push would have carried it), as `onPushReceived()` would be called by the app.
///
/// Deadlines: the connection and the response head within `timeout`; after that a
/// stream silent for longer than `idleLimit` (the server sends a comment every 15 s) is
/// closed as dead. `onEnd` says why the stream ended; reconnecting is the caller's.
public final class PushChannelClient: Sendable {
    let channel: any Channel

    init(channel: any Channel) { self.channel = channel }

    public struct Refused: Error, CustomStringConvertible {
        public var description: String
    }

    public static func connect(baseURL: String, deviceID: String, apiKey: String, timeout: TimeAmount = .seconds(5),
                               idleLimit: TimeAmount = .seconds(45), tls: ClientTLS = .system, proxies: ProxyRoutes = .direct,
                               onWake: @escaping @Sendable (JSONValue) -> Void,
                               onEnd: @escaping @Sendable (String) -> Void = { _ in }) async throws -> PushChannelClient {
        guard let endpoint = try? HTTPClient.Endpoint(baseURL) else { throw Refused(description: "\(baseURL) is not an http:// or https:// URL") }
        let (host, port, secure) = (endpoint.host, endpoint.port, endpoint.secure)
        let group = MultiThreadedEventLoopGroup.singleton
        let head = group.next().makePromise(of: Void.self)
        let reader = EventStreamReader(head: head, onWake: onWake, onEnd: onEnd)
        let handlers: @Sendable (any Channel) throws -> Void = { channel in
            if secure { try channel.pipeline.syncOperations.addHandler(tls.handler(host: host)) }
            try channel.pipeline.syncOperations.addHTTPClientHandlers()
            try channel.pipeline.syncOperations.addHandler(IdleStateHandler(readTimeout: idleLimit))
            try channel.pipeline.syncOperations.addHandler(reader)
        }
        // Through a proxy the stream goes in a tunnel: a forwarding proxy may hold an
        // answer until it is complete, and this one never is.
        let channel: any Channel
        do {
            channel = try await HTTPClient.open(host, port, through: proxies.proxy(for: host, port: port, secure: secure), on: group.next(),
                                                deadline: .now() + timeout, pipeline: handlers)
        } catch {
            // No answer will come: the head's promise ends here (NIO traps on one left unkept).
            head.fail(error)
            throw error
        }
        let target = "/api/v1/mobile/push/stream?device_id=" + PercentEncoding.encode(deviceID)
        var headers = HTTPHeaders([("Host", "\(host):\(port)"), ("Accept", "text/event-stream"), ("x-api-key", apiKey),
                                   ("x-device-id", deviceID)])
        headers.add(name: "Cache-Control", value: "no-store")
        channel.write(HTTPClientRequestPart.head(HTTPRequestHead(version: .http1_1, method: .GET, uri: target, headers: headers)),
                      promise: nil)
        channel.writeAndFlush(HTTPClientRequestPart.end(nil), promise: nil)
        let deadline = channel.eventLoop.scheduleTask(in: timeout) {
            head.fail(Refused(description: "no answer from \(baseURL) within \(timeout)"))
        }
        do {
            try await head.futureResult.get()
            deadline.cancel()
        } catch {
            deadline.cancel()
            channel.close(promise: nil)
            throw error
        }
        return PushChannelClient(channel: channel)
    }

    /// Ends the subscription.
    public func close() { channel.close(promise: nil) }
}

/// Reads the response: a 200 head completes `head`, anything else fails it; body bytes
/// are split into SSE events.
final class EventStreamReader: ChannelInboundHandler, @unchecked Sendable {
    // Unchecked: used only on its channel's event loop.
    typealias InboundIn = HTTPClientResponsePart

    let head: EventLoopPromise<Void>
    let onWake: @Sendable (JSONValue) -> Void
    let onEnd: @Sendable (String) -> Void
    var parser = ServerSentEvents.Parser()
    var ended = false

    init(head: EventLoopPromise<Void>, onWake: @escaping @Sendable (JSONValue) -> Void, onEnd: @escaping @Sendable (String) -> Void) {
        self.head = head
        self.onWake = onWake
        self.onEnd = onEnd
    }

    func channelRead(context: ChannelHandlerContext, data part: NIOAny) {
        switch unwrapInboundIn(part) {
        case .head(let response):
            if response.status == .ok {
                head.succeed()
            } else {
                head.fail(PushChannelClient.Refused(description: "the push channel answered HTTP \(response.status.code)"))
                context.close(promise: nil)
            }
        case .body(let buffer):
            guard let events = try? parser.feed(buffer.readableBytesView) else { return end(context, "a line of the stream was too long") }
            for event in events where event.name == "wake" {
                if let json = try? JSONValue.parse(event.data) { onWake(json) }
            }
        case .end:
            end(context, "the server ended the stream")
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is IdleStateHandler.IdleStateEvent {
            end(context, "the stream was silent too long")
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        head.fail(PushChannelClient.Refused(description: "the connection closed before an answer"))
        end(context, "the connection closed")
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        head.fail(error)
        end(context, "\(error)")
    }

    func end(_ context: ChannelHandlerContext, _ why: String) {
        guard !ended else { return }
        ended = true
        onEnd(why)
        context.close(promise: nil)
    }
}
