import Foundation

/// Runs blocking test work (a socket read, a wait for a child process) on a thread of its
/// own and awaits it.
///
/// Swift's cooperative pool has one thread per core (two on this machine); a synchronous
/// wait holds one of them, and two such waits starve the in-process servers of the
/// loopback tests running beside them, whose handlers need the same pool. Awaiting the
/// work here leaves the pool free. CPU-bound work goes through `cpuBound` instead.
public func offPool<T>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    let box = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Unchecked<T>, any Error>) in
        Thread.detachNewThread {
            continuation.resume(with: Swift.Result { Unchecked(value: try body()) })
        }
    }
    return box.value
}

/// Runs CPU-bound test work (a simulation, a `fleetlab` run that simulates) off the
/// cooperative pool, at most one per core at a time.
///
/// The suite starts every test at once. Unbounded, fifty simulations share two cores
/// evenly and every test, the quick loopback ones included, finishes only when the
/// slowest do: a request with a two-minute deadline waited out behind them. Bounded, the
/// simulations queue for a core (waiting suspends, it holds no thread) and the rest of
/// the suite keeps the machine's other share.
public func cpuBound<T>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    await CPUSlots.shared.acquire()
    do {
        let value = try await offPool(body)
        await CPUSlots.shared.release()
        return value
    } catch {
        await CPUSlots.shared.release()
        throw error
    }
}

/// The cores `cpuBound` work may take, handed out in arrival order.
actor CPUSlots {
    static let shared = CPUSlots(count: max(1, ProcessInfo.processInfo.activeProcessorCount))

    private var free: Int
    private var waiting: [CheckedContinuation<Void, Never>] = []

    init(count: Int) { free = count }

    func acquire() async {
        if free > 0 {
            free -= 1
            return
        }
        await withCheckedContinuation { waiting.append($0) }
    }

    func release() {
        if waiting.isEmpty {
            free += 1
        } else {
            waiting.removeFirst().resume()
        }
    }
}

/// A value handed from the worker thread to the awaiting test, which owns it from then on.
struct Unchecked<T>: @unchecked Sendable {
    var value: T
}
