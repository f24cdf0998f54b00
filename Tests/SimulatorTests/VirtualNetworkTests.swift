import Testing
import LabKernel
@testable import Simulator

@Suite("Virtual network")
struct VirtualNetworkTests {
    func network(_ wifi: LinkProfile, seed: UInt64 = 1) -> (VirtualNetwork<Int>, EndpointID, EndpointID) {
        var net = VirtualNetwork<Int>(profiles: [.wifi: wifi, .datacenter: .init(latency: .constant(0.001))], seed: StreamSeed(seed))
        let device = net.addEndpoint(access: .wifi)
        let server = net.addEndpoint(access: .datacenter)
        return (net, device, server)
    }

    @Test("latency is the sum of both access links")
    func latency() {
        var (net, device, server) = network(.init(latency: .constant(0.020)))
        let tickets = net.send(1, from: device, to: server, at: at(5))
        #expect(tickets.map { $0.deliverAt } == [at(5) + .milliseconds(21)])
        let delivered = net.deliver(slot: tickets[0].slot, at: tickets[0].deliverAt)
        #expect(delivered?.message == 1 && delivered?.from == device && delivered?.to == server)
        #expect(net.inFlight == 0)
    }

    @Test("loss and duplication follow their ratios")
    func lossAndDuplication() {
        var (net, device, server) = network(.init(latency: .constant(0.01), loss: Ratio(numerator: 1, denominator: 10),
                                                  duplication: Ratio(numerator: 1, denominator: 20)))
        var copies = 0
        for i in 0..<20_000 {
            let tickets = net.send(i, from: device, to: server, at: .zero)
            copies += tickets.count
            for t in tickets { _ = net.deliver(slot: t.slot, at: t.deliverAt) }
        }
        let lost = net.dropped[.lost] ?? 0
        #expect(abs(Double(lost) / 20_000 - 0.1) < 0.01)
        #expect(abs(Double(net.duplicated) / Double(20_000 - lost) - 0.05) < 0.01)
        #expect(copies == 20_000 - Int(lost) + Int(net.duplicated))
    }

    @Test("partitions and offline endpoints drop traffic, also while it is in flight")
    func partitionsAndOffline() {
        var (net, device, server) = network(.init(latency: .constant(0.05)))
        net.addPartition(.init(groupA: [device], from: at(10), until: at(20)))
        #expect(net.send(1, from: device, to: server, at: at(12)).isEmpty)
        #expect(net.dropped[.partitioned] == 1)
        let inFlight = net.send(2, from: device, to: server, at: at(21))
        #expect(inFlight.count == 1)
        net.setOffline(true, for: server)
        #expect(net.deliver(slot: inFlight[0].slot, at: inFlight[0].deliverAt) == nil)
        #expect(net.dropped[.receiverOffline] == 1)
        #expect(net.send(3, from: server, to: device, at: at(30)).isEmpty)
        #expect(net.dropped[.senderOffline] == 1)
        let crossing = net.send(4, from: device, to: device, at: at(9))
        #expect(crossing.count == 1, "a device can still reach itself")
    }

    @Test("an ordered stream never overtakes itself")
    func orderedStreams() {
        var (net, device, server) = network(.init(latency: .lognormal(median: 0.05, sigma: 1.5)))
        var last = Instant.zero
        for i in 0..<2_000 {
            let at = Instant(nanoseconds: Int64(i) * 1_000_000)
            for ticket in net.send(i, from: device, to: server, at: at, ordered: true) {
                #expect(ticket.deliverAt >= last)
                last = ticket.deliverAt
                _ = net.deliver(slot: ticket.slot, at: ticket.deliverAt)
            }
        }
    }
}

/// The instant `seconds` into a run.
func at(_ seconds: Int64) -> Instant { .zero + .seconds(seconds) }

/// Two endpoints playing ping-pong through the kernel: every delivery is a kernel event.
struct PingPongWorld: SimulationWorld {
    enum Event { case deliver(slot: UInt32) }
    var network: VirtualNetwork<Int>
    let a: EndpointID, b: EndpointID
    var received: [(at: Instant, value: Int, to: EndpointID)] = []

    mutating func send(_ value: Int, from: EndpointID, to: EndpointID, at now: Instant, queue: inout EventQueue<Event>) {
        for ticket in network.send(value, from: from, to: to, at: now) {
            queue.schedule(.deliver(slot: ticket.slot), at: ticket.deliverAt)
        }
    }

    mutating func handle(_ event: Event, at now: Instant, queue: inout EventQueue<Event>) {
        switch event {
        case .deliver(let slot):
            guard let delivery = network.deliver(slot: slot, at: now) else { return }
            received.append((now, delivery.message, delivery.to))
            if delivery.message < 100 {
                send(delivery.message + 1, from: delivery.to, to: delivery.from, at: now, queue: &queue)
            }
        }
    }
}

@Suite("Network deliveries as kernel events")
struct NetworkKernelTests {
    @Test("a rally of 100 messages takes exactly 100 one-way latencies, and a partition ends it")
    func pingPong() {
        var net = VirtualNetwork<Int>(profiles: [.wifi: .init(latency: .constant(0.010))], seed: StreamSeed(1))
        let a = net.addEndpoint(access: .wifi), b = net.addEndpoint(access: .wifi)
        var queue = EventQueue<PingPongWorld.Event>()
        var world = PingPongWorld(network: net, a: a, b: b)
        world.send(0, from: a, to: b, at: .zero, queue: &queue)
        var kernel = Kernel(world: world, queue: queue)
        _ = kernel.run(until: .time(at(60)))
        #expect(kernel.world.received.count == 101)
        #expect(kernel.world.received.last?.at == Instant.zero + TimeSpan.milliseconds(20 * 101))
        #expect(kernel.world.received.map(\.value) == Array(0...100))

        var cut = VirtualNetwork<Int>(profiles: [.wifi: .init(latency: .constant(0.010))], seed: StreamSeed(1))
        let c = cut.addEndpoint(access: .wifi), d = cut.addEndpoint(access: .wifi)
        cut.addPartition(.init(groupA: [c], from: .zero + .milliseconds(500), until: at(10)))
        var queue2 = EventQueue<PingPongWorld.Event>()
        var world2 = PingPongWorld(network: cut, a: c, b: d)
        world2.send(0, from: c, to: d, at: .zero, queue: &queue2)
        var kernel2 = Kernel(world: world2, queue: queue2)
        _ = kernel2.run(until: .time(at(60)))
        #expect(kernel2.world.received.count == 24, "deliveries at 20, 40, ..., 480 ms; the one due at 500 ms meets the partition")
        #expect(kernel2.world.network.dropped[.partitioned] == 1)
    }
}
