import AgentRuntimeClient
import AgentRuntimeServer
import AgentRuntimeWire
public import LabKernel

/// The agent stack of a fleet run (docs/agent-runtime.md): the Mozaiks runtime core
/// behind a worker pool, and the runtime's client core on every device of a population
/// that lists `agent`, driven by users who start chats, answer the agent after a think
/// time and answer its tool calls.
///
/// Theory of operation. Requests, socket opens and frames cross each device's link
/// (`DeviceLinks`) and wait for a server worker (`ServerQueue`); the core handles each when
/// its service ends, and its scripted steps play at the wake-ups it asks for whether or
/// not a phone listens. A client runs only while its app is on screen: when the app
/// leaves the screen, is killed or loses the radio, its socket drops and its volatile
/// state goes; its snapshot (chats, timelines, the queue of unsent actions) stays, as the
/// app's storage would, and the next run reconnects and resumes from the last applied
/// index. A user who starts a chat opens the app (the world does it, as for chat). What a
/// user does is their own stream's draws; they act only while the app is on screen, and
/// what they missed they see after the resume.
///
/// Invariants: after any pattern of drops, a client's timeline is the server's
/// transcript up to its last index, checked at every resume and at the end (equal for a
/// client connected and quiet at the end); events are applied in index order with no gap;
/// a connected client's queue of actions drains.
public struct AgentStack {
    public enum Event: Sendable {
        /// A request, socket or frame arriving, or an input to feed a client later.
        case transit(slot: UInt32)
        /// A server worker finished (void if the server crashed since `epoch`).
        case serviceDone(slot: UInt32, epoch: UInt32)
        /// A client's timer.
        case timer(device: UInt32, generation: UInt32)
        /// A scripted step of a chat falls due on the server.
        case runDue(slot: UInt32)
        /// A user starts an agent chat (the world opens the app first).
        case session(device: UInt32)
        /// A user's reaction (an input, a tool-call answer) falls due.
        case act(device: UInt32, generation: UInt32)
    }

    /// Something crossing a link, as chat's (`ChatStack.Transit`): what travels over a
    /// socket is lost with it.
    enum Transit {
        case request(device: Int, session: UInt32, id: Int, HTTPRequestMessage)
        /// A socket's upgrade, for the device's socket number `socket`.
        case connect(device: Int, session: UInt32, socket: UInt32, target: String)
        case frame(device: Int, session: UInt32, connection: Int, String)
        case input(device: Int, session: UInt32, AgentClientInput)
        /// Over socket number `socket`: its opening, a frame, its close.
        case overSocket(device: Int, session: UInt32, socket: UInt32, AgentClientInput)

        var device: Int {
            switch self {
            case .request(let device, _, _, _), .connect(let device, _, _, _), .frame(let device, _, _, _), .input(let device, _, _),
                 .overSocket(let device, _, _, _):
                return device
            }
        }
    }

    /// What a user will do next, once their think time is over.
    enum Act: Equatable {
        case input
        case respond(toolCall: String)
    }

    /// One user (one device) and the chat they are in.
    struct User {
        var stream: SeededGenerator
        /// In a chat they mean to go on with.
        var chatting = false
        var workflow = ""
        var inputs = 0
        var act: Act?
        var actGeneration: UInt32 = 0
        /// When the last input went out (for the time to the agent's first chunk).
        var inputAt: Instant?
        var chatStartedAt: Instant?
        var answeredAt: [String: Instant] = [:]
        var connectingAt: Instant?
    }

    let settings: AgentSettings
    var server: AgentServer
    var serving: ServerQueue<Transit>
    var links = DeviceLinks(label: "agent-link")
    var endpoints = EndpointLatency(stack: "agent")
    var clients: [Int: AgentClient] = [:]
    var users: [Int: User] = [:]
    /// The agent devices in order; a device's place is its user's name (`u<ordinal>`).
    var agents: [Int] = []
    var ordinal: [Int: Int] = [:]
    /// Devices whose client runs now, since when; each device's client run.
    var awakeSince: [Int: Instant] = [:]
    var session: [Int: UInt32] = [:]
    var connectionOf: [Int: Int] = [:]
    var deviceOfConnection: [Int: Int] = [:]
    var transits = InFlight<Transit>()
    var timerGeneration: [Int: UInt32] = [:]
    var timerAt: [Int: Instant] = [:]
    /// Chats with a wake-up in the queue, by slot.
    var wakeChats: [UInt32: String] = [:]
    var nextWake: UInt32 = 0
    /// When each device's last frame arrived (a client quiet since a while is caught up).
    var lastFrameAt: [Int: Instant] = [:]
    var metrics: AgentMetrics
    var invariants: AgentInvariants
    /// The tokens' key, and the tenant every device's user belongs to.
    static let app = "fleet"

    init(_ settings: AgentSettings, fleet: inout Fleet) {
        self.settings = settings
        let seed = fleet.root.child(.server).child("agent")
        var config = AgentServerConfig()
        var keyStream = seed.child("token-key").generator()
        config.tokenKey = keyStream.bytes(32)
        config.workflows = settings.mix.map(\.workflow)
        server = AgentServer(config: config, seed: seed.child("core"), wallClock: fleet.engineClock)
        serving = ServerQueue(settings.server, seed: seed.child("service"))
        for (index, deviceClass) in fleet.classes.enumerated() where deviceClass.stacks.contains(.agent) {
            agents += fleet.devices.indices.filter { Int(fleet.classOfDevice[$0]) == index }
        }
        metrics = AgentMetrics(recorder: &fleet.recorder, workflows: settings.mix.map(\.workflow.name))
        invariants = AgentInvariants(ledger: &fleet.invariants)
        let issued = fleet.engineClock.unixMilliseconds / 1_000
        for (place, device) in agents.enumerated() {
            ordinal[device] = place
            let user = "u\(place)"
            let token = RuntimeToken(appID: Self.app, userID: user, issuedAt: issued, expiresAt: issued + 400 * 86_400).sign(key: config.tokenKey)
            clients[device] = AgentClient(snapshot: AgentClient.Snapshot(appID: Self.app, userID: user, token: token,
                                                                         seed: fleet.deviceSeed(device).child("agent-client")))
            users[device] = User(stream: fleet.deviceSeed(device).child("agent-user").generator())
        }
    }

    /// Each user's first chat (a stream of its own, so the run's start changes no other draw).
    func scheduleSessions(_ fleet: Fleet, into queue: inout EventQueue<FleetWorld.Event>) {
        guard settings.peakRate > 0 else { return }
        for device in agents {
            var stream = fleet.deviceSeed(device).child("agent-first").generator()
            queue.schedule(.agent(.session(device: UInt32(device))), at: .zero + HourWeights.gap(mean: 86_400 / settings.peakRate, using: &stream))
        }
    }

    mutating func scheduleSession(_ device: Int, after now: Instant, queue: inout EventQueue<FleetWorld.Event>) {
        queue.schedule(.agent(.session(device: UInt32(device))), at: now + HourWeights.gap(mean: 86_400 / settings.peakRate, using: &users[device]!.stream))
    }

    mutating func handle(_ event: Event, fleet: inout Fleet, now: Instant, queue: inout EventQueue<FleetWorld.Event>) {
        switch event {
        case .transit(let slot): arrived(slot, now: now, queue: &queue, fleet: &fleet)
        case .serviceDone(let slot, let epoch): served(slot, epoch: epoch, now: now, queue: &queue, fleet: &fleet)
        case .timer(let device, let generation): timerFired(Int(device), generation: generation, now: now, queue: &queue, fleet: &fleet)
        case .runDue(let slot): runDue(slot, now: now, queue: &queue, fleet: &fleet)
        case .session:
            break  // the world opens the app first (`FleetWorld.agentSession`)
        case .act(let device, let generation): act(Int(device), generation: generation, now: now, queue: &queue, fleet: &fleet)
        }
    }
}

struct AgentMetrics {
    let chats: [String: MetricHandle]
    let completed: [String: MetricHandle]
    let runDuration: [String: MetricHandle]
    let inputs: MetricHandle
    let firstChunk: MetricHandle
    let resumeReplayed: MetricHandle
    let resumeTime: MetricHandle
    let toolResponseTime: MetricHandle
    let reconnects: MetricHandle
    let connected: MetricHandle
    let serverUtilisation: MetricHandle
    let serverQueue: MetricHandle
    let serverWait: MetricHandle

    init(recorder: inout Recorder, workflows: [String]) {
        var chats: [String: MetricHandle] = [:], completed: [String: MetricHandle] = [:], runDuration: [String: MetricHandle] = [:]
        for name in workflows {
            chats[name] = recorder.register("agent.chats", labels: [("workflow", name)])
            completed[name] = recorder.register("agent.completed", labels: [("workflow", name)])
            runDuration[name] = recorder.register("agent.run_duration", labels: [("workflow", name)])
        }
        (self.chats, self.completed, self.runDuration) = (chats, completed, runDuration)
        inputs = recorder.register("agent.inputs")
        firstChunk = recorder.register("agent.first_chunk")
        resumeReplayed = recorder.register("agent.resume_replayed")
        resumeTime = recorder.register("agent.resume_time")
        toolResponseTime = recorder.register("agent.tool_response_time")
        reconnects = recorder.register("agent.reconnects")
        connected = recorder.register("agent.connected")
        serverUtilisation = recorder.register("agent.server_utilisation")
        serverQueue = recorder.register("agent.server_queue")
        serverWait = recorder.register("agent.server_wait")
    }
}

struct AgentInvariants {
    let timelineMatches: Int
    let appliedInOrder: Int
    let actionsSettle: Int

    init(ledger: inout InvariantLedger) {
        timelineMatches = ledger.register("agent.timeline_matches_transcript")
        appliedInOrder = ledger.register("agent.applied_in_order")
        actionsSettle = ledger.register("agent.actions_settle")
    }
}
