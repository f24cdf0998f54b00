import Live
import NIOCore
import NIOPosix

/// Runs `body` with a client on an event loop of its own, and on that loop as a load
/// test's phones run, then shuts both down. The suite's in-process servers share the
/// singleton loops with their handlers' work, which can hold a timer there for seconds.
func withLoopClient(_ body: (HTTPClient) async throws -> Void) async throws {
    let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    let client = HTTPClient(group: group)
    do {
        try await withTaskExecutorPreference(EventLoopTaskExecutor(group.next())) { try await body(client) }
    } catch {
        client.shutdown()
        try await group.shutdownGracefully()
        throw error
    }
    client.shutdown()
    try await group.shutdownGracefully()
}
