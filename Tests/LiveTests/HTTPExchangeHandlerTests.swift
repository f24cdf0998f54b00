import LabKernel
@testable import Live
import NIOCore
import NIOPosix
import Testing

/// A connection that ends before its request is written: the request fails at once, with
/// why the connection ended. (A server certificate the client does not trust ends the
/// connection on its loop while the caller hops there to write; the request then had no
/// answer, close or timer to end it, and `fleetlab device` waited forever.)
@Suite("HTTP exchange: a connection gone before the request")
struct HTTPExchangeHandlerTests {
    struct Refused: Error, Equatable {}

    /// A connection to a listener on loopback with only `exchange` on it, ended by `end`,
    /// then an exchange expected on it with a deadline an hour away: its outcome.
    func expectAfter(_ end: @escaping @Sendable (any Channel) -> Void) async throws -> Result<HTTPResponseMessage, any Error> {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let listener = try await ServerBootstrap(group: group).bind(host: "127.0.0.1", port: 0).get()
        let exchange = HTTPExchangeHandler()
        let channel = try await ClientBootstrap(group: group)
            .channelInitializer { channel in channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(exchange) } }
            .connect(to: listener.localAddress!).get()
        end(channel)
        try await channel.closeFuture.get()
        let promise = channel.eventLoop.makePromise(of: HTTPResponseMessage.self)
        try await channel.eventLoop.submit { exchange.expect(promise, by: .now() + .hours(1), else: .timedOut("an hour")) }.get()
        let outcome: Result<HTTPResponseMessage, any Error>
        do { outcome = .success(try await promise.futureResult.get()) } catch { outcome = .failure(error) }
        try await listener.close()
        try await group.shutdownGracefully()
        return outcome
    }

    @Test("closed before the request: it fails at once as a connection the request never went out on (which the client may send again)", .timeLimit(.minutes(1)))
    func closedFirst() async throws {
        let outcome = try await expectAfter { $0.close(promise: nil) }
        #expect { try outcome.get() } throws: { ($0 as? StaleConnection)?.sent == false }
    }

    @Test("an error ended it (a TLS handshake that failed, say): the request fails at once with that error", .timeLimit(.minutes(1)))
    func failedFirst() async throws {
        let outcome = try await expectAfter { $0.pipeline.fireErrorCaught(Refused()) }
        #expect(throws: Refused()) { try outcome.get() }
    }
}
