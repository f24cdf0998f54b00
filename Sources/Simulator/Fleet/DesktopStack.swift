import DesktopBridgeClient
import DesktopBridgeServer
import DesktopBridgeWire
public import LabKernel

/// The desktop bridge stack of a fleet run (docs/desktop-bridge.md): one desktop core per
/// user, at home, and the phone client core on each of the user's phones.
///
/// Theory of operation. A phone reaches its desktop only over the home Wi-Fi: while its
/// network is anything else (or the desktop sleeps) a dial fails, and leaving the Wi-Fi
/// drops the socket (a LAN drop). Frames cross the LAN with Wi-Fi latency, in order per
/// socket. The client runs while its app is on screen (`suspend` when it leaves), dials
/// on `connect`, and after each handshake rebuilds its timelines from the desktop's
/// history. Users open the app to prompt; the first prompt on a desktop creates its
/// session, which every phone of the desktop then mirrors; some prompts are cancelled
/// mid-turn. Desktops follow a day (`DeskHours`): asleep, they end their turns and let
/// their phones go.
///
/// Invariant: every phone's timeline is, at every change, a prefix of its desktop's
/// history, update for update (so after a reconnect nothing is missing or doubled).
public struct DesktopStack {
    public enum Event: Sendable {
        case transit(slot: UInt32)
        case phoneTimer(device: UInt32, generation: UInt32)
        case deskTimer(desk: UInt32, generation: UInt32)
        /// A user prompts from this phone (the world opens the app first).
        case prompt(device: UInt32)
        /// The user cancels turn `turn` of the desktop.
        case cancel(desk: UInt32, turn: UInt32)
        /// A desktop wakes or sleeps.
        case desk(desk: UInt32, awake: Bool)
        /// Desktops begin their day.
        case setup
    }

    enum Transit {
        /// A phone's dial reaches its desktop (or fails).
        case dial(device: Int, socket: UInt32)
        case dialed(device: Int, socket: UInt32, open: Bool)
        case toDesk(device: Int, socket: UInt32, String)
        case toPhone(device: Int, socket: UInt32, String)
    }

    /// One user's desktop: its core, its phones, its day.
    struct Desk {
        var bridge: DesktopBridge
        var phones: [Int]
        var stream: SeededGenerator
        var awake = true
        var timerAt: Instant?
        var timerGeneration: UInt32 = 0
        /// Each phone's connection on the core.
        var connection: [Int: Int] = [:]
        var session: String?
        /// The turn running: who prompted, when, whether its first chunk reached them.
        var turn: (device: Int, at: Instant, firstChunk: Bool)?
        var turns: UInt32 = 0
    }

    /// A phone: its desktop, its stream, its socket.
    struct Phone {
        var desk: Int
        var stream: SeededGenerator
        var link: SeededGenerator
        /// Which dial the current socket is (frames of an older one are dropped).
        var socket: UInt32 = 0
        var open = false
        var running = false
        var timerAt: Instant?
        var timerGeneration: UInt32 = 0
        /// When the current dial began (a rebuild's time runs from it).
        var dialedAt: Instant?
        /// A prompt waiting for the desktop's session to exist.
        var pending: String?
        /// When its user last sent a prompt.
        var promptAt: Instant?
        /// When the last frame on its socket reaches it, and reaches the desktop.
        var toPhone: Instant = .zero
        var toDesk: Instant = .zero
        var reconnects = 0
    }

    let settings: DesktopSettings
    var desks: [Desk] = []
    var phones: [Int: Phone] = [:]
    var clients: [Int: DesktopClient] = [:]
    var ordered: [Int] = []
    var transits = InFlight<Transit>()
    var metrics: DesktopMetrics
    var invariants: DesktopInvariants

    init(_ settings: DesktopSettings, fleet: inout Fleet) {
        self.settings = settings
        let seed = fleet.root.child(.server).child("desktop")
        for (index, deviceClass) in fleet.classes.enumerated() where deviceClass.stacks.contains(.desktopBridge) {
            ordered += fleet.devices.indices.filter { Int(fleet.classOfDevice[$0]) == index }
        }
        var plan = seed.child("plan").generator()
        var config = DesktopConfig()
        config.script.think = settings.think
        config.script.toolTime = settings.toolTime
        config.script.every = settings.every
        config.script.wordsPerChunk = settings.wordsPerChunk
        var cursor = 0
        while cursor < ordered.count {
            let owned = Array(ordered[cursor..<min(ordered.count, cursor + CountShares.count(settings.phonesPerDesktop, draw: plan.nextUnit()))])
            cursor += owned.count
            let deskSeed = fleet.deviceSeed(owned[0]).child("desktop")
            desks.append(Desk(bridge: DesktopBridge(config: config, seed: deskSeed.child("core"), wallClock: .unixEpoch),
                              phones: owned, stream: deskSeed.child("day").generator()))
            for device in owned {
                var stream = fleet.deviceSeed(device).child("desktop-user").generator()
                let dialect: ACPDialect = stream.chance(settings.legacyShare) ? .legacy : .current
                clients[device] = DesktopClient(config: .init(dialect: dialect), seed: fleet.deviceSeed(device).child("desktop-client"))
                phones[device] = Phone(desk: desks.count - 1, stream: stream, link: fleet.deviceSeed(device).child("desktop-lan").generator())
            }
        }
        metrics = DesktopMetrics(recorder: &fleet.recorder)
        invariants = DesktopInvariants(ledger: &fleet.invariants)
    }

    func scheduleSetup(into queue: inout EventQueue<FleetWorld.Event>) {
        queue.schedule(.desktop(.setup), at: .zero + .seconds(1))
    }

    mutating func handle(_ event: Event, fleet: inout Fleet, now: Instant, queue: inout EventQueue<FleetWorld.Event>) {
        switch event {
        case .transit(let slot): arrived(slot, now: now, queue: &queue, fleet: &fleet)
        case .phoneTimer(let device, let generation):
            guard phones[Int(device)]?.timerGeneration == generation else { return }
            phones[Int(device)]!.timerAt = nil
            feed(Int(device), .timerFired, now: now, queue: &queue, fleet: &fleet)
        case .deskTimer(let desk, let generation):
            guard desks[Int(desk)].timerGeneration == generation else { return }
            desks[Int(desk)].timerAt = nil
            carryOut(Int(desk), desks[Int(desk)].bridge.expire(now: now), now: now, queue: &queue, fleet: &fleet)
        case .prompt:
            break  // the world opens the app first (`FleetWorld.desktopPrompt`)
        case .cancel(let desk, let turn): cancel(Int(desk), turn: turn, now: now, queue: &queue, fleet: &fleet)
        case .desk(let desk, let awake): self.desk(Int(desk), awake: awake, now: now, queue: &queue, fleet: &fleet)
        case .setup:
            for desk in desks.indices { planDay(desk, from: now, queue: &queue, fleet: &fleet) }
            guard settings.peakRate > 0 else { return }
            for device in ordered { schedulePrompt(device, after: now, queue: &queue) }
        }
    }
}

struct DesktopMetrics {
    static let outcomes = ["ok", "cancelled", "failed", "not_connected"]
    let prompts: [String: MetricHandle]
    let firstChunk: MetricHandle
    let turnTime: MetricHandle
    let chunks: MetricHandle
    let reconnects: MetricHandle
    let rebuilds: MetricHandle
    let rebuildTime: MetricHandle
    let gaveUp: MetricHandle
    let connected: MetricHandle
    let awake: MetricHandle

    init(recorder: inout Recorder) {
        var prompts: [String: MetricHandle] = [:]
        for outcome in Self.outcomes { prompts[outcome] = recorder.register("desktop.prompts", labels: [("outcome", outcome)]) }
        self.prompts = prompts
        firstChunk = recorder.register("desktop.first_chunk")
        turnTime = recorder.register("desktop.turn_time")
        chunks = recorder.register("desktop.chunks")
        reconnects = recorder.register("desktop.reconnects")
        rebuilds = recorder.register("desktop.rebuilds")
        rebuildTime = recorder.register("desktop.rebuild_time")
        gaveUp = recorder.register("desktop.gave_up")
        connected = recorder.register("desktop.phones_connected")
        awake = recorder.register("desktop.desktops_awake")
    }
}

struct DesktopInvariants {
    let timelineIsHistory: Int

    init(ledger: inout InvariantLedger) {
        timelineIsHistory = ledger.register("desktop.timeline_is_the_desktop_history")
    }
}
