import Foundation

/// Runs CPU-bound test work (a simulation) on a thread of its own and awaits it.
///
/// Swift's cooperative pool has one thread per core (two on this machine); a synchronous
/// test that simulates for seconds holds one of them, and two such tests starve the
/// in-process servers of the loopback tests running beside them, whose handlers need
/// the same pool. Awaiting the work here leaves the pool free.
public func offPool<T>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    let box = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Unchecked<T>, any Error>) in
        Thread.detachNewThread {
            continuation.resume(with: Swift.Result { Unchecked(value: try body()) })
        }
    }
    return box.value
}

/// A value handed from the worker thread to the awaiting test, which owns it from then on.
struct Unchecked<T>: @unchecked Sendable {
    var value: T
}
