import Foundation
public import LabKernel
import NIOCore
import NIOHTTP1
import NIOPosix

/// One part of a streamed answer, as it arrives.
public enum HTTPStreamPart: Sendable, Equatable {
    case head(status: Int, headers: [HTTPHeader])
    case body([UInt8])
    case end
}

extension HTTPClient {
    /// Sends `request` on a connection of its own and hands back the answer as it arrives
    /// (a Server-Sent Events stream, say): the head within `timeout`, then body pieces until
    /// the end. Cancelling the consuming task closes the connection.
    public func stream(_ request: HTTPRequestMessage, to baseURL: String, timeout: Duration = .seconds(20)) async throws
        -> AsyncThrowingStream<HTTPStreamPart, any Error> {
        let endpoint = try Endpoint(baseURL)
        let (parts, continuation) = AsyncThrowingStream<HTTPStreamPart, any Error>.makeStream()
        let reader = StreamReader(continuation: continuation)
        let channel = try await connect(to: endpoint, timeout: TimeAmount(timeout), then: reader)
        let timer = channel.eventLoop.scheduleTask(in: TimeAmount(timeout)) {
            continuation.finish(throwing: HTTPClientError.timedOut(baseURL + request.path))
            channel.close(promise: nil)
        }
        reader.headArrived = { timer.cancel() }
        continuation.onTermination = { _ in channel.close(promise: nil) }
        channel.write(HTTPClientRequestPart.head(Self.head(of: request, to: endpoint, closing: true, via: proxies.proxy(for: endpoint.host, port: endpoint.port, secure: endpoint.secure))),
                      promise: nil)
        if !request.body.isEmpty { channel.write(HTTPClientRequestPart.body(.byteBuffer(ByteBuffer(bytes: request.body))), promise: nil) }
        channel.writeAndFlush(HTTPClientRequestPart.end(nil), promise: nil)
        return parts
    }

    /// Hands a response's parts to the stream as they come.
    final class StreamReader: ChannelInboundHandler, @unchecked Sendable {
        // Unchecked: touched only on its channel's event loop (and `headArrived` set before the request goes out).
        typealias InboundIn = HTTPClientResponsePart
        let continuation: AsyncThrowingStream<HTTPStreamPart, any Error>.Continuation
        var headArrived: () -> Void = {}
        var ended = false

        init(continuation: AsyncThrowingStream<HTTPStreamPart, any Error>.Continuation) { self.continuation = continuation }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case .head(let head):
                headArrived()
                continuation.yield(.head(status: Int(head.status.code), headers: head.headers.map { HTTPHeader($0.name, $0.value) }))
            case .body(let buffer):
                continuation.yield(.body(Array(buffer.readableBytesView)))
            case .end:
                ended = true
                continuation.yield(.end)
                continuation.finish()
                context.close(promise: nil)
            }
        }

        func channelInactive(context: ChannelHandlerContext) {
            if !ended { continuation.finish(throwing: HTTPClientError.closed) }
            context.fireChannelInactive()
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            continuation.finish(throwing: error)
            context.close(promise: nil)
        }
    }
}
