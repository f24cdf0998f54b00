import LabKernel

/// A server's worker pool in virtual time (`ServerCapacity`): the capacity model every
/// simulated server puts in front of its core.
///
/// Theory of operation. A request that arrives while a worker is free is taken at once;
/// otherwise it waits in a FIFO queue, and beyond `queueLimit` it is refused (the caller
/// answers 503). A worker holds a request for a service time drawn from the pool's own
/// stream; the caller schedules the completion and hands the core the request only then,
/// so the server's state changes at completion. A completion frees its worker and the
/// caller starts the next waiting request that is still wanted. A crash bumps `epoch`
/// (completions scheduled before it are void), empties the queue and frees every worker;
/// while down the pool admits nothing. A slowdown (a `server-slowdown` fault) stretches
/// the service time of every request a worker takes while it lasts, from the same draw,
/// so the pool's stream and everything else in the run stay as they were. A share of errors
/// (a `server-errors` fault) refuses each arrival by a draw of its own stream (`errors`),
/// so it too leaves the service times as they were. Busy worker-time is integrated for
/// utilisation.
struct WorkerPool {
    enum Admission: Equatable {
        /// A worker took the request; its service ends after this long.
        case serving(TimeSpan)
        case queued
        /// The queue is full: the server answers 503.
        case refused
        /// The server is down: nothing answers.
        case down
    }

    let capacity: ServerCapacity
    private(set) var busy = 0
    private var waiting: [(token: UInt32, arrived: Instant)] = []
    private var head = 0
    private(set) var isDown = false
    /// How many times its drawn service time a request now holds a worker (1: as drawn).
    var slowdown: Double = 1
    /// The share of arrivals refused at once (a `server-errors` fault); zero: none.
    var errorShare: Ratio = .zero
    /// Bumped by a crash: completions scheduled before it are void.
    private(set) var epoch: UInt32 = 0
    private var busyIntegral: Int64 = 0
    private var lastChange: Instant = .zero
    private var generator: SeededGenerator
    private var errorDraws: SeededGenerator

    init(_ capacity: ServerCapacity, seed: StreamSeed) {
        self.capacity = capacity
        generator = seed.generator()
        errorDraws = seed.child("errors").generator()
    }

    var queueLength: Int { waiting.count - head }

    mutating func admit(_ token: UInt32, now: Instant) -> Admission {
        guard !isDown else { return .down }
        if errorShare != .zero && errorDraws.chance(errorShare) { return .refused }
        if busy < capacity.workers { return .serving(take(now: now)) }
        guard queueLength < capacity.queueLimit else { return .refused }
        if head > 1_024 && head * 2 > waiting.count {
            waiting.removeFirst(head)
            head = 0
        }
        waiting.append((token, now))
        return .queued
    }

    /// A worker finished a request scheduled in `epoch`; false when a crash voided it.
    mutating func complete(epoch: UInt32, now: Instant) -> Bool {
        guard epoch == self.epoch else { return false }
        account(to: now)
        busy -= 1
        return true
    }

    /// Hands the next waiting request that `isWanted` to a free worker: its token, how long
    /// it waited, and its service time; nil when no worker is free or nothing waits.
    mutating func startNext(now: Instant, isWanted: (UInt32) -> Bool) -> (token: UInt32, waited: TimeSpan, service: TimeSpan)? {
        while busy < capacity.workers, head < waiting.count {
            let next = waiting[head]
            head += 1
            guard isWanted(next.token) else { continue }
            return (next.token, now - next.arrived, take(now: now))
        }
        return nil
    }

    /// The server crashes (`true`) or comes back: a crash loses the queue and the requests
    /// in service.
    mutating func setDown(_ down: Bool, now: Instant) {
        account(to: now)
        isDown = down
        guard down else { return }
        epoch &+= 1
        busy = 0
        waiting.removeAll()
        head = 0
    }

    /// Busy worker-time over the bucket that started at `start`, in percent of capacity;
    /// starts the next bucket's integral.
    mutating func utilisation(bucketStart start: Int64, now: Instant) -> Double {
        account(to: now)
        let available = Double(capacity.workers) * Double(max(1, now.nanoseconds - start))
        defer { busyIntegral = 0 }
        return 100 * Double(busyIntegral) / available
    }

    private mutating func take(now: Instant) -> TimeSpan {
        account(to: now)
        busy += 1
        return capacity.serviceTime.sampleSpan(using: &generator).stretched(by: slowdown)
    }

    private mutating func account(to now: Instant) {
        busyIntegral += Int64(busy) * (now - lastChange).nanoseconds
        lastChange = now
    }
}
