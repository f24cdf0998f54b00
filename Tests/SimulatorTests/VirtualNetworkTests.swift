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
