import Testing
import LabKernel
@testable import Simulator
import Benchmarks

@Suite("Event queue and kernel")
struct KernelTests {
    @Test("events pop in time order, ties in scheduling order")
    func ordering() {
        var queue = EventQueue<Int>()
        var g = SeededGenerator(seed: 4)
        var expected: [(Int64, Int)] = []
        for id in 0..<5_000 {
            let t = Int64(g.next(below: 100))
            queue.schedule(id, at: Instant(nanoseconds: t))
            expected.append((t, id))
        }
        expected.sort { ($0.0, $0.1) < ($1.0, $1.1) }
        var popped: [(Int64, Int)] = []
        while let (time, id) = queue.pop() { popped.append((time.nanoseconds, id)) }
        #expect(popped.map(\.1) == expected.map(\.1))
    }

    @Test("cancelled events never run and do not count as pending")
    func cancellation() {
        var queue = EventQueue<String>()
        let a = queue.schedule("a", at: Instant(nanoseconds: 1))
        queue.schedule("b", at: Instant(nanoseconds: 2))
        let c = queue.schedule("c", at: Instant(nanoseconds: 3))
        queue.cancel(a)
        queue.cancel(c)
        queue.cancel(c)
        #expect(queue.count == 1)
        #expect(queue.peekTime() == Instant(nanoseconds: 2))
        #expect(queue.pop()?.payload == "b")
        #expect(queue.pop() == nil)
    }

    struct Counter: SimulationWorld {
        var seen: [Int64] = []
        mutating func handle(_ event: Int, at now: Instant, queue: inout EventQueue<Int>) {
            seen.append(now.nanoseconds)
            if event > 0 { queue.schedule(event - 1, at: now + .nanoseconds(10)) }
        }
    }

    @Test("run stops at a time, an event count or a predicate")
    func stopConditions() {
        var queue = EventQueue<Int>()
        queue.schedule(100, at: .zero)
        var kernel = Kernel(world: Counter(), queue: queue)
        #expect(kernel.run(until: .time(Instant(nanoseconds: 50))) == .reachedTime)
        #expect(kernel.world.seen == [0, 10, 20, 30, 40])
        #expect(kernel.now == Instant(nanoseconds: 50))
        #expect(kernel.run(until: .events(3)) == .reachedEventCount)
        #expect(kernel.world.seen.last == 70)
        #expect(kernel.run(until: .predicate { $0.seen.count == 10 }) == .predicateHeld)
        #expect(kernel.eventsProcessed == 10)
        #expect(kernel.run(until: .events(5), progressInterval: 2) { _ in false } == .stoppedByProgress)
        #expect(kernel.eventsProcessed == 12)
        #expect(kernel.run(until: .events(1_000)) == .queueEmpty)
    }

    @Test("the benchmark's kernel and bare loops do exactly the same work")
    func benchmarkIsFair() {
        let figures = KernelBenchmark.run(events: 20_000, pending: 500, repetitions: 1, clock: { 0 })
        #expect(figures.kernelChecksum == figures.bareChecksum)
    }
}
