import Foundation
import LabKernel
import NIOCore
import NIOHTTP1

/// Collects one response at a time on a keep-alive connection, and fails it when its
/// deadline passes (closing the connection: a late answer must not be read as the next
/// request's).
///
/// A connection that ends before a byte of the current answer arrives fails the exchange
/// with `StaleConnection`: on a connection from the pool that is the server closing it as
/// the request went out, which `HTTPClient` may send again on a new one.
///
/// The deadline is kept lazily: one timer per connection, armed for the first exchange's
/// deadline and, when it fires, re-armed for the current exchange's if that one is still
/// running and not yet late. Exchanges take milliseconds and deadlines are seconds, so the
/// timer fires about once per deadline period instead of being scheduled and cancelled for
/// every request (NIO cancels a scheduled task by a linear search of its heap, which was a
/// few per cent of a load test's CPU).
final class HTTPExchangeHandler: ChannelInboundHandler, @unchecked Sendable {
    // Unchecked: touched only on its channel's event loop.
    typealias InboundIn = HTTPClientResponsePart

    var promise: EventLoopPromise<HTTPResponseMessage>?
    var response = HTTPResponseMessage(status: 0)
    /// When the current exchange fails, and with what.
    var deadline = NIODeadline.distantFuture
    var timeout = HTTPClientError.closed
    /// The armed timer and the instant it fires at.
    var timer: (task: Scheduled<Void>, at: NIODeadline)?
    var context: ChannelHandlerContext?
    /// Why the connection ended, once it has: an exchange expected after that fails at
    /// once. The connection can end before its first request is written (a TLS handshake
    /// the server's certificate fails runs on the loop while the caller hops there), and no
    /// answer, close or timer would come for that request.
    var ended: (any Error)?

    /// Whether a byte of the current exchange's answer has arrived.
    var answering = false
    /// Whether the server keeps the connection open after the current answer (HTTP/1.1
    /// without `Connection: close`, HTTP/1.0 with `Connection: keep-alive`).
    var keepAlive = true

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.task.cancel()
        timer = nil
        self.context = nil
    }

    /// The next answer completes `promise`; it fails with `timeout` once `deadline` passes.
    func expect(_ promise: EventLoopPromise<HTTPResponseMessage>, by deadline: NIODeadline, else timeout: HTTPClientError) {
        if let ended { return promise.fail(ended) }
        self.promise = promise
        answering = false
        response = HTTPResponseMessage(status: 0)
        self.deadline = deadline
        self.timeout = timeout
        if let timer, timer.at <= deadline { return }
        arm(at: deadline)
    }

    func arm(at instant: NIODeadline) {
        timer?.task.cancel()
        guard let context else { return }
        let task = context.eventLoop.scheduleTask(deadline: instant) { [self] in timerFired() }
        timer = (task, instant)
    }

    func timerFired() {
        timer = nil
        guard let pending = promise else { return }
        guard NIODeadline.now() >= deadline else { return arm(at: deadline) }
        promise = nil
        pending.fail(timeout)
        context?.close(promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            answering = true
            keepAlive = head.isKeepAlive
            response.status = Int(head.status.code)
            response.headers = head.headers.map { HTTPHeader($0.name, $0.value) }
        case .body(let buffer):
            response.body += buffer.readableBytesView
        case .end:
            let done = promise
            promise = nil
            // The server will not take another request on it (`Connection: close`, an HTTP/1.0
            // answer): closed before the answer is handed on, so it never goes back to the pool.
            if !keepAlive { context.close(promise: nil) }
            done?.succeed(response)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        timer?.task.cancel()
        timer = nil
        // A request expected after this was never sent.
        if ended == nil { ended = StaleConnection(sent: false) }
        promise?.fail(closedMidExchange)
        promise = nil
        context.fireChannelInactive()
    }

    /// What the current exchange fails with when the connection ends under it.
    var closedMidExchange: any Error { answering ? HTTPClientError.closed : StaleConnection(sent: true) }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A reset is the server closing the connection (with the request unread): as a close.
        let reset = (error as? IOError).map { [ECONNRESET, EPIPE].contains($0.errnoCode) } ?? false
        if ended == nil { ended = reset ? StaleConnection(sent: false) : error }
        promise?.fail(reset ? closedMidExchange : error)
        promise = nil
        context.close(promise: nil)
    }
}

/// The connection ended with no byte of the answer: before the request was written
/// (`sent: false`), or after.
struct StaleConnection: Error {
    let sent: Bool
}
