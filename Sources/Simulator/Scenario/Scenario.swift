public import LabKernel
import LabStore

/// A simulation scenario, as written in a YAML file under `simulations/`.
/// docs/scenarios.md documents every key.
public struct Scenario: Sendable {
    public var name: String
    public var description: String
    public var seed: UInt64
    public var duration: TimeSpan
    /// Time of day at the run's origin.
    public var startAt: TimeSpan
    /// Width of a time bucket in the results' series.
    public var bucket: TimeSpan
    public var ticks: TickSettings
    public var links: LinkSettings
    public var devices: [Population]
    public var faults: [Fault]
    public var thresholds: [Threshold]
    /// How many events the results keep in their sample.
    public var eventSample: Int
    /// Workflow workloads run by the devices' engines; nil for a device-model-only run.
    public var workflows: WorkflowSettings?
    /// The devices' engines sync with a simulated orch8 server; nil: no sync.
    public var sync: SyncSettings?
    public var chat: ChatSettings?
    /// Agent chats with the Mozaiks runtime's scripted agents.
    public var agent: AgentSettings?
    /// Phones paired with their users' desktops through the AI bridge relay.
    public var bridge: BridgeSettings?
    /// Phones mirroring their users' desktops over the desktop bridge, at home.
    public var desktop: DesktopSettings?
    /// The push service every stack's server wakes phones through.
    public var push = PushSettings()
    /// What the stacks' radio and CPU use costs the battery.
    public var energy = EnergySettings()
    /// The scenario file's text, stored in the results so a run documents itself.
    public var text: String = ""

    public var deviceCount: Int { devices.reduce(0) { $0 + $1.count } }
    /// The slice of the fleet this run simulates; nil for all of it. A run option, not part
    /// of the scenario text (its hash is the same in every shard).
    public var shard: FleetShard?
    /// How many of `faults` `--chaos` drew from the seed (the last ones); a run option.
    public internal(set) var chaos = 0

    /// The stacks a population's devices run: the ones it lists, or, when it lists none,
    /// every stack the scenario configures (workflows only where a workload applies).
    public func stacks(of population: Population) -> Set<StackKind> {
        if let listed = population.stacks { return listed }
        var stacks: Set<StackKind> = []
        if let workflows, workflows.workloads.contains(where: { $0.populations.isEmpty || $0.populations.contains(population.name) }) {
            stacks.insert(.workflows)
            if sync != nil { stacks.insert(.sync) }
        }
        if chat != nil { stacks.insert(.chat) }
        if agent != nil { stacks.insert(.agent) }
        if bridge != nil { stacks.insert(.aiBridge) }
        if desktop != nil { stacks.insert(.desktopBridge) }
        return stacks
    }

    /// Whether any population runs `stack`.
    public func runs(_ stack: StackKind) -> Bool { devices.contains { stacks(of: $0).contains(stack) } }
}

public struct TickSettings: Sendable, Hashable, Decodable {
    /// The engine's `tickIntervalMs` before the power multiplier.
    public var interval: TimeSpan = .milliseconds(100)
    public var mode: TickMode = .fastForward

    enum CodingKeys: String, CodingKey, CaseIterable { case interval, mode }

    public init() {}

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        interval = try c.decodeIfPresent(TimeSpan.self, forKey: .interval) ?? interval
        mode = try c.decodeIfPresent(TickMode.self, forKey: .mode) ?? mode
        guard interval >= .milliseconds(1) else {
            throw DecodingError.dataCorrupted(.init(codingPath: c.codingPath + [CodingKeys.interval],
                                                    debugDescription: "the tick interval must be at least 1ms"))
        }
    }
}

extension TickMode: Decodable {
    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard let mode = TickMode(rawValue: text) else {
            throw DecodingError.dataCorrupted(.init(
                codingPath: decoder.codingPath,
                debugDescription: "expected one of: \(TickMode.allCases.map(\.rawValue).joined(separator: ", ")); found '\(text)'"))
        }
        self = mode
    }
}

/// Link profiles per access kind; absent kinds keep their defaults.
public struct LinkSettings: Sendable, Hashable, Decodable {
    public var wifi: LinkProfile = .wifi
    public var cellular: LinkProfile = .cellular
    public var datacenter: LinkProfile = .datacenter

    enum CodingKeys: String, CodingKey, CaseIterable { case wifi, cellular, datacenter }

    public init() {}

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        wifi = try c.decodeIfPresent(LinkSpec.self, forKey: .wifi)?.profile(over: .wifi) ?? .wifi
        cellular = try c.decodeIfPresent(LinkSpec.self, forKey: .cellular)?.profile(over: .cellular) ?? .cellular
        datacenter = try c.decodeIfPresent(LinkSpec.self, forKey: .datacenter)?.profile(over: .datacenter) ?? .datacenter
    }

    /// The profile of one kind of access.
    public func profile(_ kind: AccessKind) -> LinkProfile {
        switch kind {
        case .wifi: return wifi
        case .cellular: return cellular
        case .datacenter: return datacenter
        }
    }

    public var profiles: [AccessKind: LinkProfile] { Dictionary(uniqueKeysWithValues: AccessKind.allCases.map { ($0, profile($0)) }) }
}

struct LinkSpec: Decodable {
    var latency: Distribution?
    var loss: Ratio?
    var duplication: Ratio?

    enum CodingKeys: String, CodingKey, CaseIterable { case latency, loss, duplication }

    func profile(over base: LinkProfile) -> LinkProfile {
        LinkProfile(latency: latency ?? base.latency, loss: loss ?? base.loss, duplication: duplication ?? base.duplication)
    }
}

/// A device population: how many devices and which profiles they follow.
public struct Population: Sendable, Hashable, Decodable {
    public var name: String
    public var count: Int
    public var power: PowerProfile
    public var lifecycle: LifecycleProfile
    public var network: NetworkProfile
    /// The stacks its devices run, as listed; nil: every stack the scenario configures.
    public var stacks: Set<StackKind>?

    enum CodingKeys: String, CodingKey, CaseIterable { case name, count, power, lifecycle, network, stacks }

    public init(name: String, count: Int, power: PowerProfile, lifecycle: LifecycleProfile, network: NetworkProfile,
                stacks: Set<StackKind>? = nil) {
        self.name = name
        self.count = count
        self.power = power
        self.lifecycle = lifecycle
        self.network = network
        self.stacks = stacks
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        name = try c.decode(String.self, forKey: .name)
        count = try c.decode(Int.self, forKey: .count)
        guard count >= 0 && count <= 50_000_000 else {
            throw DecodingError.dataCorrupted(.init(codingPath: c.codingPath + [CodingKeys.count],
                                                    debugDescription: "count must be between 0 and 50,000,000"))
        }
        power = try c.decodeIfPresent(PowerProfile.self, forKey: .power) ?? PowerProfile.presets["typical"]!
        lifecycle = try c.decodeIfPresent(LifecycleProfile.self, forKey: .lifecycle) ?? LifecycleProfile.presets["typical"]!
        network = try c.decodeIfPresent(NetworkProfile.self, forKey: .network) ?? NetworkProfile.presets["typical"]!
        if let listed = try c.decodeIfPresent([StackKind].self, forKey: .stacks) {
            guard Set(listed).count == listed.count else {
                throw DecodingError.dataCorrupted(.init(codingPath: c.codingPath + [CodingKeys.stacks], debugDescription: "a stack is listed twice"))
            }
            stacks = Set(listed)
        }
    }
}

/// A fault injected at a scenario time. Faults are data: the same list and seed give the
/// same run.
public enum Fault: Sendable, Hashable {
    /// The OS kills the app on a fraction of devices at once (an OS update, a memory storm).
    case massAppKill(at: TimeSpan, fraction: Ratio, population: String?)
    /// A fraction of devices lose their radio for a while (an outage of a carrier).
    case radioOff(at: TimeSpan, duration: TimeSpan, fraction: Ratio, population: String?)
    /// A fraction of devices cannot reach the sync server (a routing or CDN failure); they
    /// stay online otherwise.
    case partition(at: TimeSpan, duration: TimeSpan, fraction: Ratio, population: String?)
    /// A server goes down (`sync`, `chat` or `agent`; without `server:`, the one the scenario has):
    /// requests queued or in service are lost, new ones get no answer, sockets drop; its
    /// state survives the restart.
    case serverCrash(at: TimeSpan, duration: TimeSpan, server: StackKind)
    /// A server slows down without failing (a brownout: a noisy neighbour, a slow disk, a
    /// dependency timing out): every request its workers take while it lasts holds a worker
    /// `factor` times as long as its drawn service time. The queue, the latency and the
    /// clients' retries follow from the capacity model.
    case serverSlowdown(at: TimeSpan, duration: TimeSpan, server: StackKind, factor: Double)
    /// A server fails a share of its requests (a bad deploy, a failing dependency, a load
    /// shedder): each request it receives while it lasts is, by its own draw, answered 503
    /// with `Retry-After` at once, as a full queue answers, and a socket it would accept is
    /// closed with 1013. The rest are served as usual.
    case serverErrors(at: TimeSpan, duration: TimeSpan, server: StackKind, fraction: Ratio)
    /// An access network slows down for everyone on it (a congested carrier, a stadium's
    /// Wi-Fi, a slow route to the data centre): every message crossing a `link` of that
    /// kind takes `factor` times its drawn latency.
    case linkSlowdown(at: TimeSpan, duration: TimeSpan, link: AccessKind, factor: Double)
    /// Silent pushes are not delivered (APNs or FCM down).
    case pushOutage(at: TimeSpan, duration: TimeSpan)

    public var at: TimeSpan {
        switch self {
        case .massAppKill(let at, _, _), .radioOff(let at, _, _, _), .partition(let at, _, _, _), .serverCrash(let at, _, _),
             .serverSlowdown(let at, _, _, _), .serverErrors(let at, _, _, _), .linkSlowdown(let at, _, _, _), .pushOutage(let at, _):
            return at
        }
    }

    /// How long it lasts; nil for an instant fault.
    public var duration: TimeSpan? {
        switch self {
        case .massAppKill: return nil
        case .radioOff(_, let d, _, _), .partition(_, let d, _, _), .serverCrash(_, let d, _), .serverSlowdown(_, let d, _, _),
             .serverErrors(_, let d, _, _), .linkSlowdown(_, let d, _, _), .pushOutage(_, let d):
            return d
        }
    }

    public var kind: String {
        switch self {
        case .massAppKill: return "mass-app-kill"
        case .radioOff: return "radio-off"
        case .partition: return "partition"
        case .serverCrash: return "server-crash"
        case .serverSlowdown: return "server-slowdown"
        case .serverErrors: return "server-errors"
        case .linkSlowdown: return "link-slowdown"
        case .pushOutage: return "push-outage"
        }
    }

    /// The population the fault is limited to, or nil for every device.
    public var population: String? {
        switch self {
        case .massAppKill(_, _, let population), .radioOff(_, _, _, let population), .partition(_, _, _, let population):
            return population
        case .serverCrash, .serverSlowdown, .serverErrors, .linkSlowdown, .pushOutage: return nil
        }
    }

    /// The stack a fault needs: a partition cuts devices off the sync server, a crash takes
    /// down the server it names; pushes need a server that pushes.
    public var needs: Set<StackKind> {
        switch self {
        case .partition: return [.sync]
        case .serverCrash(_, _, let server), .serverSlowdown(_, _, let server, _), .serverErrors(_, _, let server, _): return [server]
        case .pushOutage: return [.sync, .chat]
        case .massAppKill, .radioOff, .linkSlowdown: return []
        }
    }
}

extension Fault: Decodable {
    enum CodingKeys: String, CodingKey, CaseIterable { case kind, at, duration, fraction, devices, server, link, factor }

    /// Which server a `server-crash` or `server-slowdown` without a `server:` key hits, set
    /// by the scenario while it decodes (the one it has); nil when it has several and the
    /// key is required.
    @TaskLocal static var defaultServer: StackKind? = .sync

    /// How many times slower a slowdown may make a server or a link: beyond a thousand a
    /// 2 ms request holds a worker for seconds (a 45 ms hop takes most of a minute), which
    /// a crash (an outage) models better.
    static let slowdownFactors: ClosedRange<Double> = 1...1_000

    static let kinds = "mass-app-kill, radio-off, partition, server-crash, server-slowdown, server-errors, link-slowdown, push-outage"

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let kind = try c.decode(String.self, forKey: .kind)
        let at = try c.decode(TimeSpan.self, forKey: .at)
        let fraction = try c.decodeIfPresent(Ratio.self, forKey: .fraction) ?? .one
        let population = try c.decodeIfPresent(String.self, forKey: .devices)
        func reject(_ keys: CodingKeys...) throws {
            for key in keys where c.contains(key) {
                throw DecodingError.dataCorrupted(.init(codingPath: c.codingPath + [key],
                                                        debugDescription: "'\(key.stringValue)' does not apply to a \(kind) fault"))
            }
        }
        /// The server a crash or a slowdown hits.
        func server() throws -> StackKind {
            guard let server = try c.decodeIfPresent(StackKind.self, forKey: .server) ?? Self.defaultServer else {
                throw DecodingError.dataCorrupted(.init(codingPath: c.codingPath, debugDescription:
                    "the scenario has several servers: name the one the \(kind) hits (server: sync, chat, agent or ai-bridge)"))
            }
            guard server.hasServer else {
                throw DecodingError.dataCorrupted(.init(codingPath: c.codingPath + [CodingKeys.server], debugDescription: "expected sync, chat, agent or ai-bridge"))
            }
            return server
        }
        /// How many times slower a slowdown makes its server or link.
        func factor() throws -> Double {
            let factor = try c.decode(Double.self, forKey: .factor)
            guard factor > Self.slowdownFactors.lowerBound, factor <= Self.slowdownFactors.upperBound else {
                throw DecodingError.dataCorrupted(.init(codingPath: c.codingPath + [CodingKeys.factor], debugDescription:
                    "expected how many times slower, more than 1 and at most 1000 (got \(factor))"))
            }
            return factor
        }
        switch kind {
        case "mass-app-kill":
            try reject(.duration, .server, .link, .factor)
            self = .massAppKill(at: at, fraction: fraction, population: population)
        case "radio-off":
            try reject(.server, .link, .factor)
            self = .radioOff(at: at, duration: try c.decode(TimeSpan.self, forKey: .duration), fraction: fraction, population: population)
        case "partition":
            try reject(.server, .link, .factor)
            self = .partition(at: at, duration: try c.decode(TimeSpan.self, forKey: .duration), fraction: fraction, population: population)
        case "server-crash":
            try reject(.fraction, .devices, .link, .factor)
            self = .serverCrash(at: at, duration: try c.decode(TimeSpan.self, forKey: .duration), server: try server())
        case "server-slowdown":
            try reject(.fraction, .devices, .link)
            self = .serverSlowdown(at: at, duration: try c.decode(TimeSpan.self, forKey: .duration), server: try server(), factor: try factor())
        case "server-errors":
            try reject(.devices, .link, .factor)
            guard c.contains(.fraction) else {
                throw DecodingError.dataCorrupted(.init(codingPath: c.codingPath + [CodingKeys.fraction], debugDescription:
                    "a server-errors fault needs the share of requests it fails (fraction: 20%)"))
            }
            self = .serverErrors(at: at, duration: try c.decode(TimeSpan.self, forKey: .duration), server: try server(), fraction: fraction)
        case "link-slowdown":
            try reject(.fraction, .devices, .server)
            let name = try c.decode(String.self, forKey: .link)
            guard let link = AccessKind.allCases.first(where: { $0.description == name }) else {
                throw DecodingError.dataCorrupted(.init(codingPath: c.codingPath + [CodingKeys.link], debugDescription:
                    "unknown link '\(name)'; expected wifi, cellular or datacenter"))
            }
            self = .linkSlowdown(at: at, duration: try c.decode(TimeSpan.self, forKey: .duration), link: link, factor: try factor())
        case "push-outage":
            try reject(.fraction, .devices, .server, .link, .factor)
            self = .pushOutage(at: at, duration: try c.decode(TimeSpan.self, forKey: .duration))
        default:
            throw DecodingError.dataCorrupted(.init(codingPath: c.codingPath + [CodingKeys.kind], debugDescription:
                "unknown fault kind '\(kind)'; expected one of: \(Self.kinds)"))
        }
    }
}
