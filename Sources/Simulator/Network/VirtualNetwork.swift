public import LabKernel

/// An endpoint on the virtual network: a device or a server, by dense integer id.
public struct EndpointID: Hashable, Comparable, Sendable, CustomStringConvertible {
    public var raw: UInt32
    public init(_ raw: UInt32) { self.raw = raw }
    public static func < (a: EndpointID, b: EndpointID) -> Bool { a.raw < b.raw }
    public var description: String { "e\(raw)" }
}

/// A message in flight, identified by its slot until it is delivered or dropped.
public struct DeliveryTicket: Hashable, Sendable {
    public var slot: UInt32
    public var deliverAt: Instant
}

/// Why a message did not arrive.
public enum DropReason: String, Sendable, Hashable, CaseIterable {
    case senderOffline = "sender_offline"
    case receiverOffline = "receiver_offline"
    case partitioned
    case lost
}

/// Typed messages between endpoints over simulated links.
///
/// Fault model: each access link adds latency drawn from its profile, loses messages and
/// duplicates them with its ratios; a partition drops everything between two groups for a
/// window of time; an offline endpoint neither sends nor receives (a message already in
/// flight to it is dropped at delivery). Reordering follows from latency variance unless
/// the sender asks for an ordered stream (TCP-like: never delivered before an earlier
/// message on the same directed pair). The network holds messages as values in a slab;
/// delivery is an event the caller schedules in its kernel with the returned tickets.
///
/// All randomness comes from the network's own streams, one per endpoint, seeded by the
/// caller (a device's endpoint by the device's own seed): a message draws from its
/// sender's stream, or, when the sender is a server, from its receiver's, so what one
/// device's traffic sees depends on no other device's, and the order in which endpoints
/// send at one instant (which the event queue does not fix) changes nothing.
public struct VirtualNetwork<Message> {
    public struct Partition: Sendable, Hashable {
        public var groupA: Set<EndpointID>
        /// Empty means "everyone not in A".
        public var groupB: Set<EndpointID>
        public var from: Instant
        public var until: Instant

        public init(groupA: Set<EndpointID>, groupB: Set<EndpointID> = [], from: Instant, until: Instant) {
            self.groupA = groupA
            self.groupB = groupB
            self.from = from
            self.until = until
        }

        func separates(_ a: EndpointID, _ b: EndpointID, at now: Instant) -> Bool {
            guard now >= from && now < until else { return false }
            func side(_ e: EndpointID) -> Int { groupA.contains(e) ? 1 : (groupB.isEmpty || groupB.contains(e) ? 2 : 0) }
            let sa = side(a), sb = side(b)
            return sa != 0 && sb != 0 && sa != sb
        }
    }

    struct InFlight {
        var message: Message
        var from: EndpointID
        var to: EndpointID
    }

    public private(set) var profiles: [LinkProfile]
    var access: [AccessKind] = []
    var offline: [Bool] = []
    var partitions: [Partition] = []
    var slots: [InFlight?] = []
    var freeSlots: [UInt32] = []
    var lastOrderedDelivery: [UInt64: Instant] = [:]
    let seed: StreamSeed
    /// Each endpoint's stream, and whether it is a server's.
    var streams: [SeededGenerator] = []
    var isServer: [Bool] = []

    public private(set) var sent: UInt64 = 0
    public private(set) var delivered: UInt64 = 0
    public private(set) var duplicated: UInt64 = 0
    public private(set) var dropped: [DropReason: UInt64] = [:]

    /// `profiles` is indexed by `AccessKind.rawValue`.
    /// How many times its drawn latency a message takes on each access kind (a
    /// `link-slowdown` fault), by `AccessKind.rawValue`.
    private var latencyFactors: [Double] = Array(repeating: 1, count: AccessKind.allCases.count)

    public mutating func setLatencyFactor(_ factor: Double, for kind: AccessKind) { latencyFactors[Int(kind.rawValue)] = factor }

    public init(profiles: [AccessKind: LinkProfile], seed: StreamSeed) {
        self.profiles = AccessKind.allCases.map { profiles[$0] ?? Self.defaultProfile($0) }
        self.seed = seed
    }

    static func defaultProfile(_ kind: AccessKind) -> LinkProfile {
        switch kind {
        case .wifi: return .wifi
        case .cellular: return .cellular
        case .datacenter: return .datacenter
        }
    }

    /// Adds an endpoint and returns its id (ids are dense, in order of addition). Its
    /// stream is `stream`, or the network's child by the endpoint's id.
    public mutating func addEndpoint(access kind: AccessKind, stream: StreamSeed? = nil, isServer server: Bool = false) -> EndpointID {
        access.append(kind)
        offline.append(false)
        streams.append((stream ?? seed.child(UInt64(access.count - 1))).generator())
        isServer.append(server)
        return EndpointID(UInt32(access.count - 1))
    }

    public var endpointCount: Int { access.count }

    public mutating func setAccess(_ kind: AccessKind, for endpoint: EndpointID) { access[Int(endpoint.raw)] = kind }
    public mutating func setOffline(_ isOffline: Bool, for endpoint: EndpointID) { offline[Int(endpoint.raw)] = isOffline }
    public func isOffline(_ endpoint: EndpointID) -> Bool { offline[Int(endpoint.raw)] }
    public mutating func addPartition(_ partition: Partition) { partitions.append(partition) }

    public var inFlight: Int { slots.count - freeSlots.count }

    /// Sends `message`; returns a ticket per copy that will arrive (none when dropped at
    /// once). The caller schedules a delivery event for each ticket.
    public mutating func send(
        _ message: Message, from: EndpointID, to: EndpointID, at now: Instant, ordered: Bool = false
    ) -> [DeliveryTicket] {
        sent += 1
        if offline[Int(from.raw)] { return drop(.senderOffline) }
        if offline[Int(to.raw)] { return drop(.receiverOffline) }
        if partitions.contains(where: { $0.separates(from, to, at: now) }) { return drop(.partitioned) }
        let up = profiles[Int(access[Int(from.raw)].rawValue)]
        let down = profiles[Int(access[Int(to.raw)].rawValue)]
        let sender = Int(isServer[Int(from.raw)] ? to.raw : from.raw)
        if streams[sender].chance(up.loss) || streams[sender].chance(down.loss) { return drop(.lost) }
        let copies = streams[sender].chance(up.duplication) || streams[sender].chance(down.duplication) ? 2 : 1
        if copies == 2 { duplicated += 1 }
        var tickets: [DeliveryTicket] = []
        for _ in 0..<copies {
            var at = now + up.latency.sampleSpan(using: &streams[sender]).stretched(by: latencyFactors[Int(access[Int(from.raw)].rawValue)])
                + down.latency.sampleSpan(using: &streams[sender]).stretched(by: latencyFactors[Int(access[Int(to.raw)].rawValue)])
            if ordered {
                let key = UInt64(from.raw) << 32 | UInt64(to.raw)
                if let last = lastOrderedDelivery[key], last > at { at = last }
                lastOrderedDelivery[key] = at
            }
            tickets.append(DeliveryTicket(slot: store(InFlight(message: message, from: from, to: to)), deliverAt: at))
        }
        return tickets
    }

    /// Completes the delivery of `slot` at `now`: the message, or nil when the receiver
    /// went offline or a partition began while it was in flight.
    public mutating func deliver(slot: UInt32, at now: Instant) -> (message: Message, from: EndpointID, to: EndpointID)? {
        guard let flight = slots[Int(slot)] else { preconditionFailure("slot \(slot) delivered twice") }
        slots[Int(slot)] = nil
        freeSlots.append(slot)
        if offline[Int(flight.to.raw)] {
            dropped[.receiverOffline, default: 0] += 1
            return nil
        }
        if partitions.contains(where: { $0.separates(flight.from, flight.to, at: now) }) {
            dropped[.partitioned, default: 0] += 1
            return nil
        }
        delivered += 1
        return (flight.message, flight.from, flight.to)
    }

    private mutating func drop(_ reason: DropReason) -> [DeliveryTicket] {
        dropped[reason, default: 0] += 1
        return []
    }

    private mutating func store(_ flight: InFlight) -> UInt32 {
        if let slot = freeSlots.popLast() {
            slots[Int(slot)] = flight
            return slot
        }
        slots.append(flight)
        return UInt32(slots.count - 1)
    }
}
