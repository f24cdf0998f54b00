public import AIBridgeClient
import AIBridgeDaemon
import AIBridgeRelay
import AIBridgeWire
public import LabKernel

/// The AI bridge stack of a fleet run (docs/ai-bridge.md): the relay core behind a worker
/// pool, a daemon core on each user's desktop, and the bridge client core on each of the
/// user's phones.
///
/// Theory of operation. Phones' requests cross their links (`DeviceLinks`) to the relay and
/// wait for a worker (`ServerQueue`); daemons' tunnel frames cross a desktop link of their
/// own. The relay forwards an exchange to its daemon and its answer (a response, or a
/// stream of events, kept in order) back to the phone. Desktops follow a day: awake from
/// morning to night (each user's own times), closed some days entirely, restarting now and
/// then with a new key pair; a closed desktop's phones get 503, a restarted one's get 401,
/// clear their keychain and pair again when their user is next at the desk. A phone sends
/// a prompt when its user opens the app to; the app leaving the screen cancels what is in
/// flight (the relay tells the daemon). Everything starts paired: the first five minutes
/// are provisioning, every desktop awake, every phone pairing once.
///
/// Invariants: the relay never forwards the words of a sealed prompt; every answer that
/// finished is the daemon's whole answer, in order; no request stays in flight past its
/// deadlines.
public struct BridgeStack {
    public enum Event: Sendable {
        case transit(slot: UInt32)
        case serviceDone(slot: UInt32, epoch: UInt32)
        case phoneTimer(device: UInt32, generation: UInt32)
        case daemonTimer(user: UInt32, generation: UInt32)
        case relayTimer(generation: UInt32)
        /// A user sends a prompt from this phone (the world opens the app first).
        case prompt(device: UInt32)
        /// A desktop wakes or sleeps.
        case desk(user: UInt32, awake: Bool)
        /// A daemon restarts with a new key pair.
        case restart(user: UInt32)
        /// The user pairs this phone again (after a 401).
        case repair(device: UInt32)
        /// Provisioning: daemons dial (0), phones pair (1), then everyone follows the day (2).
        case setup(phase: UInt8)
    }

    enum Transit {
        /// A phone's request reaches the relay.
        case request(device: Int, session: UInt32, id: Int, HTTPRequestMessage)
        /// Something for a phone's client (an answer, a stream's piece, a failure).
        case phone(device: Int, session: UInt32, BridgeClientInput)
        /// A daemon's frame reaches the relay over its tunnel (`run`: the tunnel's dial).
        case toRelay(user: Int, run: UInt32, String)
        /// A relay frame reaches a daemon.
        case toDaemon(user: Int, run: UInt32, String)
        /// A daemon's dial reaches the relay.
        case dial(user: Int, run: UInt32)
    }

    /// One user: their desktop's daemon and its tunnel, their phones, their streams.
    struct Desk {
        var daemon: BridgeDaemon
        var phones: [Int]
        var stream: SeededGenerator
        var link: SeededGenerator
        var awake = true
        /// The relay's id for the current tunnel, and which dial it is.
        var tunnel: Int?
        var run: UInt32 = 0
        var restarts: UInt64 = 0
        var timerAt: Instant?
        var timerGeneration: UInt32 = 0
        /// When the last frame toward the daemon (and toward the relay) arrives.
        var inbound: Instant = .zero
        var outbound: Instant = .zero
    }

    /// A phone: its user, its stream, its request timing.
    struct Phone {
        var user: Int
        var stream: SeededGenerator
        var seals: Bool
        var session: UInt32 = 0
        var running = false
        var timerAt: Instant?
        var timerGeneration: UInt32 = 0
        /// Each request in flight: when it was made, whether it was a pairing, its prompt's words.
        var started: [Int: (at: Instant, pair: Bool, words: Int, firstChunk: Bool)] = [:]
        var text: [Int: String] = [:]
        var repairPending = false
        /// The words of the prompt being sent (the relay cannot count a sealed one).
        var promptWords = 0
    }

    let settings: BridgeSettings
    let root: StreamSeed
    var relay: BridgeRelay
    var serving: ServerQueue<Transit>
    var links = DeviceLinks(label: "bridge-link")
    var endpoints = EndpointLatency(stack: "ai-bridge")
    var clients: [Int: BridgeClient] = [:]
    var phones: [Int: Phone] = [:]
    var desks: [Desk] = []
    /// Relay tunnel id → user; relay exchange → (phone, its session, its request id).
    var userOfTunnel: [Int: Int] = [:]
    var exchanges: [Int: (device: Int, session: UInt32, id: Int)] = [:]
    var transits = InFlight<Transit>()
    var relayTimerAt: Instant?
    var relayTimerGeneration: UInt32 = 0
    var provisioning = true
    var ordered: [Int] = []
    var metrics: BridgeMetrics
    var invariants: BridgeInvariants

    init(_ settings: BridgeSettings, fleet: inout Fleet) {
        self.settings = settings
        root = fleet.root
        let seed = fleet.root.child(.server).child("ai-bridge")
        relay = BridgeRelay(config: RelayConfig(), seed: seed.child("core"))
        serving = ServerQueue(settings.relay, seed: seed.child("service"))
        for (index, deviceClass) in fleet.classes.enumerated() where deviceClass.stacks.contains(.aiBridge) {
            ordered += fleet.devices.indices.filter { Int(fleet.classOfDevice[$0]) == index }
        }
        var plan = seed.child("plan").generator()
        var cursor = 0
        while cursor < ordered.count {
            let n = CountShares.count(settings.phonesPerUser, draw: plan.nextUnit())
            let owned = Array(ordered[cursor..<min(ordered.count, cursor + n)])
            cursor += n
            let userSeed = fleet.deviceSeed(owned[0]).child("bridge-desk")
            var identity = userSeed.child("identity").generator()
            var config = BridgeDaemon.Config(daemonID: "desk-\(desks.count)")
            config.chat = .scripted(think: settings.think, wordsPerChunk: settings.wordsPerChunk, every: settings.every)
            config.keepPairingOpen = true
            let daemon = try! BridgeDaemon(config: config, identitySeed: identity.bytes(32), seed: userSeed.child("run-0"))
            desks.append(Desk(daemon: daemon, phones: owned, stream: userSeed.child("schedule").generator(), link: userSeed.child("link").generator()))
            for device in owned {
                var stream = fleet.deviceSeed(device).child("bridge-user").generator()
                let seals = stream.chance(settings.sealedShare)
                var config = BridgeClient.Config(relayURL: "http://relay")
                config.seal = seals
                clients[device] = BridgeClient(snapshot: .init(deviceID: "phone-\(device)", seed: fleet.deviceSeed(device).child("bridge-client")), config: config)
                phones[device] = Phone(user: desks.count - 1, stream: stream, seals: seals)
            }
        }
        metrics = BridgeMetrics(recorder: &fleet.recorder)
        invariants = BridgeInvariants(ledger: &fleet.invariants)
    }

    static let provisioningEnds = Instant.zero + .minutes(5)

    func scheduleSetup(into queue: inout EventQueue<FleetWorld.Event>) {
        queue.schedule(.aiBridge(.setup(phase: 0)), at: .zero + .seconds(1))
        queue.schedule(.aiBridge(.setup(phase: 1)), at: .zero + .seconds(30))
        queue.schedule(.aiBridge(.setup(phase: 2)), at: Self.provisioningEnds)
    }

    mutating func handle(_ event: Event, fleet: inout Fleet, now: Instant, queue: inout EventQueue<FleetWorld.Event>) {
        switch event {
        case .transit(let slot): arrived(slot, now: now, queue: &queue, fleet: &fleet)
        case .serviceDone(let slot, let epoch): served(slot, epoch: epoch, now: now, queue: &queue, fleet: &fleet)
        case .phoneTimer(let device, let generation):
            guard phones[Int(device)]?.timerGeneration == generation else { return }
            phones[Int(device)]!.timerAt = nil
            feed(Int(device), .timerFired, now: now, queue: &queue, fleet: &fleet)
        case .daemonTimer(let user, let generation):
            guard desks[Int(user)].timerGeneration == generation else { return }
            desks[Int(user)].timerAt = nil
            feed(daemon: Int(user), .timerFired, now: now, queue: &queue, fleet: &fleet)
        case .relayTimer(let generation):
            guard generation == relayTimerGeneration else { return }
            relayTimerAt = nil
            carryOut(relay.expire(now: now), now: now, queue: &queue, fleet: &fleet)
        case .prompt:
            break  // the world opens the app first (`FleetWorld.bridgePrompt`)
        case .desk(let user, let awake): desk(Int(user), awake: awake, now: now, queue: &queue, fleet: &fleet)
        case .restart(let user): restart(Int(user), now: now, queue: &queue, fleet: &fleet)
        case .repair(let device): repair(Int(device), now: now, queue: &queue, fleet: &fleet)
        case .setup(let phase): setup(phase, now: now, queue: &queue, fleet: &fleet)
        }
    }
}

/// How a phone's bridge request ended, as `bridge.requests{outcome}`, `bridge.latency{outcome}`
/// and `bridge.pairings{outcome}` name it: the simulator's phones and a load test's alike.
public enum BridgeOutcome {
    public static let requests = ["ok", "bridge_offline", "unauthorized", "timed_out", "interrupted", "unknown_command", "refused", "other"]
    public static let pairings = ["ok", "refused", "offline", "throttled", "timed_out"]

    /// A command's outcome (nil: answered).
    public static func request(_ error: BridgeError?) -> String {
        switch error {
        case nil: return "ok"
        case .bridgeOffline?: return "bridge_offline"
        case .unauthorized?: return "unauthorized"
        case .timedOut?: return "timed_out"
        case .interrupted?: return "interrupted"
        case .unknownCommand?: return "unknown_command"
        case .notPaired?, .pairingRefused?, .tooManyAttempts?, .invalidRequest?: return "refused"
        case .server?: return "other"
        }
    }

    /// A pairing's outcome (nil: paired).
    public static func pairing(_ error: BridgeError?) -> String {
        switch error {
        case nil: return "ok"
        case .tooManyAttempts?: return "throttled"
        case .bridgeOffline?: return "offline"
        case .timedOut?: return "timed_out"
        case .notPaired?, .unknownCommand?, .invalidRequest?, .unauthorized?, .pairingRefused?, .interrupted?, .server?: return "refused"
        }
    }
}

struct BridgeMetrics {
    let requests: [String: MetricHandle]
    let latency: [String: MetricHandle]
    let firstChunk: MetricHandle
    let pairings: [String: MetricHandle]
    let pairingTime: MetricHandle
    let repairs: MetricHandle
    let restarts: MetricHandle
    let daemonsOnline: MetricHandle
    let relayUtilisation: MetricHandle
    let relayQueue: MetricHandle
    let relayWait: MetricHandle

    init(recorder: inout Recorder) {
        var requests: [String: MetricHandle] = [:], latency: [String: MetricHandle] = [:], pairings: [String: MetricHandle] = [:]
        for outcome in BridgeOutcome.requests {
            requests[outcome] = recorder.register("bridge.requests", labels: [("outcome", outcome)])
            latency[outcome] = recorder.register("bridge.latency", labels: [("outcome", outcome)])
        }
        for outcome in BridgeOutcome.pairings { pairings[outcome] = recorder.register("bridge.pairings", labels: [("outcome", outcome)]) }
        (self.requests, self.latency, self.pairings) = (requests, latency, pairings)
        firstChunk = recorder.register("bridge.first_chunk")
        pairingTime = recorder.register("bridge.pairing_time")
        repairs = recorder.register("bridge.repairs")
        restarts = recorder.register("bridge.daemon_restarts")
        daemonsOnline = recorder.register("bridge.daemons_online")
        relayUtilisation = recorder.register("bridge.server_utilisation")
        relayQueue = recorder.register("bridge.server_queue")
        relayWait = recorder.register("bridge.server_wait")
    }
}

struct BridgeInvariants {
    let sealedUnread: Int
    let answersWhole: Int
    let nothingHangs: Int

    init(ledger: inout InvariantLedger) {
        sealedUnread = ledger.register("bridge.relay_never_reads_sealed_prompts")
        answersWhole = ledger.register("bridge.answers_whole_and_in_order")
        nothingHangs = ledger.register("bridge.no_request_outlives_its_deadlines")
    }
}
