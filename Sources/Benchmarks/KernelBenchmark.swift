import LabKernel
import Simulator

/// `fleetlab bench kernel`: the kernel against a bare binary-heap loop on the same
/// event pattern, measured in the same process.
///
/// The pattern is the classic hold model: `pending` timers are armed, then each popped
/// event arms one more at `now + delay` with delays uniform in [1 µs, 10 ms], drawn from
/// one seeded stream, so both loops see exactly the same sequence of times. The bare loop
/// is the floor: a binary heap of (time, sequence) and nothing else. The kernel adds what a
/// simulation needs: typed payloads, dispatch to a world, stop conditions and progress.
public enum KernelBenchmark {
    public struct Figures: Sendable {
        public var events: UInt64
        public var pending: Int
        public var kernelSeconds: Double
        public var bareSeconds: Double
        /// Both loops reduce their events to a checksum so neither can be optimised away,
        /// and so the two can be checked to have done the same work.
        public var kernelChecksum: UInt64
        public var bareChecksum: UInt64

        public var kernelEventsPerSecond: Double { Double(events) / kernelSeconds }
        public var bareEventsPerSecond: Double { Double(events) / bareSeconds }
        /// Kernel time over bare time: 1.0 means the kernel costs nothing extra.
        public var ratio: Double { kernelSeconds / bareSeconds }
    }

    /// A world that only re-arms: the kernel's own overhead, nothing else.
    struct HoldWorld: SimulationWorld {
        enum Event { case timer(id: UInt32) }
        var generator: SeededGenerator
        var checksum: UInt64 = 0

        mutating func handle(_ event: Event, at now: Instant, queue: inout EventQueue<Event>) {
            switch event {
            case .timer(let id):
                checksum = checksum &* 31 &+ UInt64(now.nanoseconds) &+ UInt64(id)
                queue.schedule(.timer(id: id), at: now + KernelBenchmark.delay(&generator))
            }
        }
    }

    @inline(__always)
    static func delay(_ generator: inout SeededGenerator) -> TimeSpan {
        TimeSpan(nanoseconds: 1_000 + Int64(generator.next(below: 10_000_000)))
    }

    /// Runs both loops `repetitions` times, alternating, and keeps each one's best time.
    public static func run(
        events: UInt64 = 5_000_000, pending: Int = 10_000, seed: UInt64 = 1, repetitions: Int = 3,
        clock: () -> Double
    ) -> Figures {
        var figures = Figures(events: events, pending: pending, kernelSeconds: .infinity, bareSeconds: .infinity,
                              kernelChecksum: 0, bareChecksum: 0)
        for _ in 0..<max(1, repetitions) {
            var start = clock()
            figures.bareChecksum = runBare(events: events, pending: pending, seed: seed)
            figures.bareSeconds = min(figures.bareSeconds, clock() - start)
            start = clock()
            figures.kernelChecksum = runKernel(events: events, pending: pending, seed: seed)
            figures.kernelSeconds = min(figures.kernelSeconds, clock() - start)
        }
        return figures
    }

    static func runKernel(events: UInt64, pending: Int, seed: UInt64) -> UInt64 {
        var generator = SeededGenerator(seed: seed)
        var queue = EventQueue<HoldWorld.Event>(reservingCapacity: pending + 1)
        for id in 0..<pending {
            queue.schedule(.timer(id: UInt32(id)), at: .zero + delay(&generator))
        }
        var kernel = Kernel(world: HoldWorld(generator: generator), queue: queue)
        _ = kernel.run(until: .events(events))
        return kernel.world.checksum
    }

    /// The reference: a plain binary heap of (time, sequence, id) and a loop.
    static func runBare(events: UInt64, pending: Int, seed: UInt64) -> UInt64 {
        var generator = SeededGenerator(seed: seed)
        var heap = BareBinaryHeap()
        heap.storage.reserveCapacity(pending + 1)
        var sequence: UInt64 = 0
        for id in 0..<pending {
            heap.push(BareBinaryHeap.Entry(time: delay(&generator).nanoseconds, sequence: sequence, id: UInt32(id)))
            sequence += 1
        }
        var checksum: UInt64 = 0
        for _ in 0..<events {
            let top = heap.pop()
            checksum = checksum &* 31 &+ UInt64(top.time) &+ UInt64(top.id)
            heap.push(BareBinaryHeap.Entry(time: top.time + delay(&generator).nanoseconds, sequence: sequence, id: top.id))
            sequence += 1
        }
        return checksum
    }
}

/// The textbook binary heap the kernel is measured against.
struct BareBinaryHeap {
    struct Entry {
        var time: Int64
        var sequence: UInt64
        var id: UInt32
        @inline(__always) func precedes(_ o: Entry) -> Bool { time < o.time || (time == o.time && sequence < o.sequence) }
    }
    var storage: [Entry] = []

    mutating func push(_ entry: Entry) {
        storage.append(entry)
        storage.withUnsafeMutableBufferPointer { h in
            var index = h.count - 1
            while index > 0 {
                let parent = (index - 1) / 2
                guard entry.precedes(h[parent]) else { break }
                h[index] = h[parent]
                index = parent
            }
            h[index] = entry
        }
    }

    mutating func pop() -> Entry {
        let last = storage.removeLast()
        if storage.isEmpty { return last }
        let top = storage[0]
        storage.withUnsafeMutableBufferPointer { h in
            var index = 0
            let count = h.count
            while true {
                let left = 2 * index + 1
                if left >= count { break }
                var best = left
                if left + 1 < count, h[left + 1].precedes(h[left]) { best = left + 1 }
                guard h[best].precedes(last) else { break }
                h[index] = h[best]
                index = best
            }
            h[index] = last
        }
        return top
    }
}
