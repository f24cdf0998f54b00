import LabCrypto
public import LabKernel
import SecureChatClient
import SecureChatServer
import ServerStorage

/// The chat stack of a fleet run (docs/chat.md): the d3chat server core behind a worker
/// pool, a client core with real crypto on every chatting device, and the plan of who
/// talks where.
///
/// Theory of operation. Requests, responses and socket frames cross each device's link
/// with its latency (an offline device's requests fail at once and its socket is closed);
/// requests, socket opens and frames from clients wait for a server worker
/// (`WorkerPool`), and the core handles each when its service ends. A client runs only
/// while the app may chat: on screen, or in a background window a push opened (the
/// periodic background-refresh windows are the engine's). When the app stops (suspended,
/// killed, out of battery) the client's volatile state goes and its socket drops; the
/// snapshot stays, as the app's storage would, and the next run restores the client from
/// it (`.start`: me, ticket, socket, channels, catch-up). A message stored for a device
/// whose client is not running makes the stack push it; a user who talks opens the app
/// on one of their phones. Until the set-up phases are done every signed-up client runs:
/// the accounts and groups exist before the run begins.
public struct ChatStack {
    public enum Event: Sendable {
        /// A request, socket or frame arriving, or an input to feed a client later.
        case transit(slot: UInt32)
        /// A server worker finished (void if the server crashed since `epoch`).
        case serviceDone(slot: UInt32, epoch: UInt32)
        /// The set-up phases are over: from now on clients follow their apps.
        case provisioned
        /// A client's timer.
        case timer(device: UInt32, generation: UInt32)
        /// A user sends a message.
        case talk(user: UInt32)
        /// A set-up phase: sign-ups, logins, groups, members.
        case setup(phase: UInt8)
        /// A user does something besides sending (`ChatAction`).
        case action(user: UInt32, kind: UInt8)
        /// A follow-up of an action falls due.
        case followUp(slot: UInt32)
    }

    /// Something crossing a link. `session` is the device's client run it belongs to: an
    /// answer for a client that has stopped since is dropped. What travels over a socket
    /// is lost with it (`DeviceLinks`): a frame reaches the server only on the connection
    /// it was written to, and the server's arrivals carry the device's socket number.
    enum Transit {
        case request(device: Int, session: UInt32, id: Int, HTTPRequestMessage)
        /// A socket's upgrade, for the device's socket number `socket`.
        case connect(device: Int, session: UInt32, socket: UInt32, ticket: String)
        case frame(device: Int, session: UInt32, connection: Int, String)
        case input(device: Int, session: UInt32, ClientInput)
        /// Over socket number `socket`: its opening, a frame, its close.
        case overSocket(device: Int, session: UInt32, socket: UInt32, ClientInput)

        var device: Int {
            switch self {
            case .request(let device, _, _, _), .connect(let device, _, _, _), .frame(let device, _, _, _), .input(let device, _, _),
                 .overSocket(let device, _, _, _):
                return device
            }
        }
    }

    /// What happens later because of an action: a member adds a leaver back, a phone that
    /// was logged out or removed signs in again.
    enum FollowUp {
        case rejoin(user: Int, group: Int)
        case signIn(device: Int)
    }

    /// A device is a reader of a message only if its keys (and its user's membership)
    /// were on the server this long before the send: the time `devices.changed` and
    /// membership events take to reach a connected sender.
    static let readerGrace: TimeSpan = .seconds(60)

    let settings: ChatSettings
    let root: StreamSeed
    var server: ChatServer
    /// Where the server sets its older messages aside (nil: it keeps them all in memory).
    var archive: SQLiteChatArchive?
    /// Where the phones' chat clients set their older messages aside (nil: they keep them
    /// all in memory), and how many snapshots have rows there.
    var timelineArchive: SQLiteTimelineArchive?
    var timelineOwners = 0
    /// Why an archive stopped taking rows (the run cannot be trusted past it).
    var archiveFailure: String? { archive?.failure ?? timelineArchive?.failure }
    /// The server's capacity model in front of the core, and what waits for or holds its workers.
    var serving: ServerQueue<Transit>
    /// Each chatting device's link to the server.
    var links = DeviceLinks(label: "chat-link")
    /// `http.latency` and `http.failures` by route, and each device's requests in flight.
    var endpoints = EndpointLatency(stack: "chat")
    /// Devices whose client runs now, each since when.
    var awakeSince: [Int: Instant] = [:]
    /// Devices in a background window a push opened.
    var pushWindow: Set<Int> = []
    /// Devices whose client runs a push's background catch-up (no socket yet): it becomes
    /// a full start when the app comes on screen.
    var catchingUp: Set<Int> = []
    /// Devices a chat push is on its way to (one at a time).
    var pushInFlight: Set<Int> = []
    /// Each device's client run; bumped when it starts or stops.
    var session: [Int: UInt32] = [:]
    /// Until the set-up phases are over every signed-up client runs.
    var provisioning = true
    /// Each device's client counters through its earlier runs (a restored client counts
    /// from zero).
    var statsBefore: [Int: ChatClient.Stats] = [:]
    /// When the server last pushed each device: pushes collapse within `pushCollapse`.
    var lastPushAt: [Int: Instant] = [:]
    /// Each chatting device's client.
    var clients: DeviceTable<ChatClient>
    var userOfDevice: [Int: Int] = [:]
    /// The chatting devices in order, and each one's place in that order: its name on the
    /// chat server (`d<ordinal>`) and in message texts, so a population that does not chat
    /// changes no byte another device sends.
    var chatting: [Int] = []
    var ordinal: [Int: Int] = [:]
    var devicesOfUser: [[Int]] = []
    var connectionOf: [Int: Int] = [:]
    /// Devices whose accepted socket's opening is still on its way, and how many frames
    /// reached a client before its socket's opening: none may (a real connection's upgrade
    /// answer comes before any frame), which the chat tests check.
    var awaitingOpening: Set<Int> = []
    var framesBeforeOpening = 0
    /// What was on its way over a socket that had gone by its arrival, and so was lost
    /// (both ways; not recorded: a chat test checks the loss happens and is survived).
    var lostWithSockets = 0
    var deviceOfConnection: [Int: Int] = [:]
    var transits = InFlight<Transit>()
    var timerGeneration: [Int: UInt32] = [:]
    /// Each client's wake-up in the queue (its `nextDeadline` when last scheduled).
    var timerAt: [Int: Instant] = [:]
    /// Each user's stream (when they talk, what they do, which of their phones): a stream
    /// of the user's first device, so no other population's chat changes it.
    var userStreams: [SeededGenerator] = []
    /// Groups as user indices (the first creates it), their channels, each user's groups.
    var groups: [[Int]] = []
    var groupChannel: [Int: String] = [:]
    var groupsOfUser: [Int: [Int]] = [:]
    var dmPartners: [Int: [Int]] = [:]
    var sent = SentMessages()
    /// Server user id → user index.
    var userIndex: [String: Int] = [:]
    /// Client counters already recorded, per device (of its current run).
    var recordedStats: [Int: ChatClient.Stats] = [:]
    var metrics: ChatMetrics
    var invariants: ChatInvariants
    /// Devices signed in (or signing in) now; the rest wait to be added, or were removed
    /// or logged out.
    var active: Set<Int> = []
    /// When each device's current keys reached the server (it became addressable).
    var keysAt: [Int: Instant] = [:]
    /// Devices removed or logged out, and when: they must decrypt nothing sent after.
    var retiredAt: [Int: Instant] = [:]
    /// The user's other devices whose sessions a logout-all is ending: their `loggedOut`
    /// is what the user asked for, not a lost session.
    var loggingOut: Set<Int> = []
    /// How many times each device signed in afresh (its client's seed).
    var incarnation: [Int: UInt64] = [:]
    var followUps: [UInt32: FollowUp] = [:]
    /// The first decryption failure of each device, for the invariant's message.
    var firstFailure: [Int: String] = [:]
    var nextFollowUp: UInt32 = 0

    /// The text a message was sent with, without the mark an edit adds.
    static func original(_ text: String) -> String {
        text.hasSuffix(editMark) ? String(text.dropLast(editMark.count)) : text
    }

    static let editMark = " (edited)"

    /// Users, their devices and the plan of groups and DMs, before the first event.
    init(_ settings: ChatSettings, fleet: inout Fleet) {
        self.settings = settings
        root = fleet.root
        let seed = fleet.root.child(.server).child("chat")
        var config = ChatServerConfig()
        config.passwordCost = .minimum  // thousands of sign-ups; the cost is not what this models
        server = ChatServer(config: config, seed: seed.child("core"), wallClock: fleet.engineClock)
        // Without a temporary file the messages stay in memory: the same run, larger.
        if settings.setsHistoryAside, let archive = try? SQLiteChatArchive() {
            server.state.messages.setAside(into: archive, keepingPerChannel: settings.messagesInMemoryPerChannel)
            server.state.refreshTokens.setAside(into: archive)
            self.archive = archive
        }
        if settings.setsHistoryAside { timelineArchive = try? SQLiteTimelineArchive() }
        serving = ServerQueue(settings.server, seed: seed.child("service"))
        var plan = seed.child("plan").generator()
        var chatting: [Int] = []
        for (index, deviceClass) in fleet.classes.enumerated() where deviceClass.stacks.contains(.chat) {
            chatting += fleet.devices.indices.filter { Int(fleet.classOfDevice[$0]) == index }
        }
        self.chatting = chatting
        clients = DeviceTable(members: chatting, fleetSize: fleet.devices.count)
        for (index, device) in chatting.enumerated() { ordinal[device] = index }
        var cursor = 0
        while cursor < chatting.count {
            let draw = plan.nextUnit()
            let n = draw < settings.devicesPerUser[0].fraction ? 1 : draw < settings.devicesPerUser[0].fraction + settings.devicesPerUser[1].fraction ? 2 : 3
            devicesOfUser.append(Array(chatting[cursor..<min(chatting.count, cursor + n)]))
            cursor += n
        }
        for list in devicesOfUser { userStreams.append(fleet.deviceSeed(list[0]).child("chat-user").generator()) }
        metrics = ChatMetrics(recorder: &fleet.recorder, actions: settings.churn.isOn || settings.actions != ChatActions())
        invariants = ChatInvariants(ledger: &fleet.invariants, devicesLeave: settings.churn.removesPerUserDay > 0
                                        || settings.actions.logoutsPerUserDay > 0 || settings.actions.logoutAllsPerUserDay > 0)
        for (user, list) in devicesOfUser.enumerated() {
            for (position, device) in list.enumerated() {
                userOfDevice[device] = user
                clients[device] = ChatClient(snapshot: Self.freshSnapshot(fleet.deviceSeed(device).child("chat-client"), settings: settings,
                                                                         archive: timelineArchive, owners: &timelineOwners))
                // With churn, a user's last phone (of two or three) is one they add later.
                let later = settings.churn.addsPerUserDay > 0 && list.count > 1 && position == list.count - 1
                if !later { active.insert(device) }
            }
        }
        let users = devicesOfUser.count
        if users >= settings.groupSize.lowerBound {
            for g in 0..<settings.groups {
                let size = min(users, settings.groupSize.lowerBound + Int(plan.next() % UInt64(settings.groupSize.count)))
                var members: [Int] = []
                while members.count < size {
                    let user = Int(plan.next() % UInt64(users))
                    if !members.contains(user) { members.append(user) }
                }
                groups.append(members)
                for user in members { groupsOfUser[user, default: []].append(g) }
            }
        }
        if users >= 2 {
            for user in 0..<users {
                for _ in 0..<settings.dmsPerUser {
                    var other = Int(plan.next() % UInt64(users))
                    if other == user { other = (other + 1) % users }
                    if dmPartners[user]?.contains(other) ?? false { continue }
                    dmPartners[user, default: []].append(other)
                    dmPartners[other, default: []].append(user)
                }
            }
        }
    }

    /// When the set-up phases are over and clients start following their apps.
    static let provisioningEnds = Instant.zero + .minutes(5)

    func scheduleSetup(into queue: inout EventQueue<FleetWorld.Event>) {
        for phase in 0..<4 { queue.schedule(.chat(.setup(phase: UInt8(phase))), at: .zero + .seconds(1 + 60 * Int64(phase))) }
        queue.schedule(.chat(.provisioned), at: Self.provisioningEnds)
    }

    mutating func handle(_ event: Event, fleet: inout Fleet, now: Instant, queue: inout EventQueue<FleetWorld.Event>) {
        switch event {
        case .transit(let slot): arrived(slot, now: now, queue: &queue, fleet: &fleet)
        case .serviceDone(let slot, let epoch): served(slot, epoch: epoch, now: now, queue: &queue, fleet: &fleet)
        case .provisioned: provisioned(fleet: &fleet, now: now, queue: &queue)
        case .timer(let device, let generation): timerFired(Int(device), generation: generation, now: now, queue: &queue, fleet: &fleet)
        case .talk:
            break  // the world opens the app first (`FleetWorld.talk`)
        case .setup(let phase): setup(phase, now: now, queue: &queue, fleet: &fleet)
        case .action(let user, let kind): act(Int(user), ChatAction(rawValue: kind) ?? .presence, now: now, queue: &queue, fleet: &fleet)
        case .followUp(let slot): followUp(slot, now: now, queue: &queue, fleet: &fleet)
        }
    }
}

struct ChatMetrics {
    let messages: [MetricHandle]
    let ackLatency: [MetricHandle]
    let deliveryLatency: [MetricHandle]
    let decrypted: MetricHandle
    let failures: MetricHandle
    let reconnects: MetricHandle
    let replenished: MetricHandle
    let refreshes: MetricHandle
    let connected: MetricHandle
    let typing: MetricHandle
    /// Sessions the server ended against the user's will (a forced logout).
    let sessionsLost: MetricHandle
    let serverUtilisation: MetricHandle
    let serverQueue: MetricHandle
    let serverWait: MetricHandle
    /// `chat.actions{kind}`: what users did besides sending, by ChatAction and edit/delete.
    let actions: [String: MetricHandle]

    static let kinds = ["dm", "group"]

    init(recorder: inout Recorder, actions withActions: Bool) {
        messages = Self.kinds.map { recorder.register("chat.messages", labels: [("kind", $0)]) }
        ackLatency = Self.kinds.map { recorder.register("chat.ack_latency", labels: [("kind", $0)]) }
        deliveryLatency = Self.kinds.map { recorder.register("chat.delivery_latency", labels: [("kind", $0)]) }
        decrypted = recorder.register("chat.decrypted")
        failures = recorder.register("chat.decryption_failures")
        reconnects = recorder.register("chat.reconnects")
        replenished = recorder.register("chat.otk_replenished")
        refreshes = recorder.register("chat.refreshes")
        connected = recorder.register("chat.connected")
        typing = recorder.register("chat.typing")
        sessionsLost = recorder.register("chat.sessions_lost")
        serverUtilisation = recorder.register("chat.server_utilisation")
        serverQueue = recorder.register("chat.server_queue")
        serverWait = recorder.register("chat.server_wait")
        actions = withActions ? Dictionary(uniqueKeysWithValues: Self.actionKinds.map { ($0, recorder.register("chat.actions", labels: [("kind", $0)])) }) : [:]
    }

    static let actionKinds = ["add_device", "remove_device", "leave", "rejoin", "history", "presence", "logout", "logout_all", "sign_in", "edit", "delete"]
}

struct ChatInvariants {
    let everyMemberReads: Int
    let noDecryptionFailure: Int
    let perSenderOrder: Int
    let noDuplicates: Int
    let noPlaintextOnServer: Int
    /// Only when devices leave their users (churn, logouts).
    let removedReadNothing: Int?
    let sendsSettle: Int

    init(ledger: inout InvariantLedger, devicesLeave: Bool) {
        everyMemberReads = ledger.register("chat.every_member_device_decrypts")
        noDecryptionFailure = ledger.register("chat.no_decryption_failures")
        perSenderOrder = ledger.register("chat.per_sender_order")
        noDuplicates = ledger.register("chat.no_duplicates")
        noPlaintextOnServer = ledger.register("chat.no_plaintext_on_server")
        removedReadNothing = devicesLeave ? ledger.register("chat.removed_devices_read_nothing_after") : nil
        sendsSettle = ledger.register("chat.sends_settle")
    }
}

extension ChatStack {
    /// A new client's empty store: with the phones' archive, its older messages go there.
    static func freshSnapshot(_ seed: StreamSeed, settings: ChatSettings, archive: SQLiteTimelineArchive?, owners: inout Int) -> ChatClient.Snapshot {
        var snapshot = ChatClient.Snapshot(seed: seed)
        if let archive {
            snapshot.setAside(into: archive, owner: owners, keepingPerChannel: settings.messagesInMemoryPerChannel)
            owners += 1
        }
        return snapshot
    }
}
