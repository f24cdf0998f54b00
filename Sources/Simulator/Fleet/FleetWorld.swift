public import LabKernel
public import LabStore

/// The simulated fleet: every device of a scenario, the stacks its phones run, the
/// recorder and the fault schedule.
///
/// Shape. The phones and the instruments are one shared value (`Fleet`); each client
/// stack is a value of its own that owns its state, its events, its metric handles and
/// its invariants: `WorkflowStack` (the orch8 engine on each phone), `SyncStack` (each
/// engine's sync client and the sync server core), `ChatStack` (the d3chat client on each
/// chatting phone and the chat server core). The world routes each event to its stack
/// (`Event.workflows`, `.sync`, `.chat`) and each device observation (an app kill, the
/// radio going offline, a power state) to every stack that cares. A new stack brings its
/// file, its case in `Event` and its lines in `handle`, `observe` and the bucket and run
/// ends (docs/architecture.md).
///
/// Event order at one instant: bucket ends and faults are scheduled before any device
/// wake-up, so at equal times they run first. Device wake-ups carry a generation number;
/// when something outside the device (a fault) changes its deadlines, the generation is
/// bumped and the stale wake-up is ignored.
public struct FleetWorld: SimulationWorld {
    public enum Event: Sendable {
        case wake(device: UInt32, generation: UInt32)
        case bucketEnd(index: UInt32)
        case fault(index: UInt16, ending: Bool)
        /// A push (from `stack`'s server) reaches a phone.
        case push(device: UInt32, stack: StackKind)
        case workflows(WorkflowStack.Event)
        case sync(SyncStack.Event)
        case chat(ChatStack.Event)
        case agent(AgentStack.Event)
        case aiBridge(BridgeStack.Event)
        case desktop(DesktopStack.Event)
    }

    public internal(set) var fleet: Fleet
    var workflows: WorkflowStack?
    var sync: SyncStack?
    var chat: ChatStack?
    var agent: AgentStack?
    var bridge: BridgeStack?
    var desktop: DesktopStack?
    var metrics: FleetMetrics
    var invariantIDs: FleetInvariants
    var eventsInBucket: UInt64 = 0
    /// Engine ticks counted at the last bucket end (their energy is the workflow stack's).
    var engineTicksRecorded: UInt64 = 0
    /// What each killed app's stacks had stored when it died, until it runs again.
    var storedAtKill: [Int: StoredFacts] = [:]
    /// `device.state_survives_relaunch`, when a stack stores anything.
    var survivesRelaunch: Int?
    /// `faults.active` by fault kind; the faults in force, and the kinds seen this bucket.
    var faultGauges: [String: MetricHandle] = [:]
    var faultsInForce: Set<Int> = []
    /// Each fault's label among a device's draws (`faultLabels`).
    let faultLabels: [UInt64]
    var faultKindsInBucket: Set<String> = []
    /// Receives each closed bucket's rows (the results writer); nil in model-only runs.
    let sink: (@Sendable (ResultsBatch) -> Void)?

    public init(scenario: Scenario, sink: (@Sendable (ResultsBatch) -> Void)?) {
        var fleet = Fleet(scenario: scenario)
        self.sink = sink
        faultLabels = Self.faultLabels(scenario.faults)
        // Registration order fixes metric and invariant ids: keep it.
        metrics = FleetMetrics(recorder: &fleet.recorder)
        invariantIDs = FleetInvariants(ledger: &fleet.invariants)
        if let settings = scenario.workflows, scenario.runs(.workflows) { workflows = WorkflowStack(settings, fleet: &fleet) }
        for kind in Set(scenario.faults.map(\.kind)).sorted() {
            faultGauges[kind] = fleet.recorder.register("faults.active", labels: [("kind", kind)])
        }
        if let settings = scenario.sync, workflows != nil, scenario.runs(.sync) { sync = SyncStack(settings, fleet: &fleet, workflows: &workflows!) }
        if let settings = scenario.chat, scenario.runs(.chat) { chat = ChatStack(settings, fleet: &fleet) }
        if let settings = scenario.agent, scenario.runs(.agent) { agent = AgentStack(settings, fleet: &fleet) }
        if let settings = scenario.bridge, scenario.runs(.aiBridge) { bridge = BridgeStack(settings, fleet: &fleet) }
        if let settings = scenario.desktop, scenario.runs(.desktopBridge) { desktop = DesktopStack(settings, fleet: &fleet) }
        if workflows != nil || chat != nil || agent != nil || bridge != nil || desktop != nil { survivesRelaunch = fleet.invariants.register("device.state_survives_relaunch") }
        fleet.energy.register(Set(StackKind.allCases.filter(scenario.runs)), classes: fleet.classes, recorder: &fleet.recorder)
        fleet.push.register([StackKind.sync, .chat].filter(scenario.runs), recorder: &fleet.recorder)
        self.fleet = fleet
    }

    // The shared parts by their old names, for readers of a finished run.
    public var devices: [VirtualDevice] { fleet.devices }
    public var classes: [DeviceClass] { fleet.classes }
    public var scenario: Scenario { fleet.scenario }
    public var recorder: Recorder { fleet.recorder }
    public var invariants: InvariantLedger { fleet.invariants }
    public var sampler: EventSampler { fleet.sampler }

    /// The events a run starts with: bucket ends, faults, each stack's first events, then
    /// each device's first wake-up.
    public func initialEvents() -> EventQueue<Event> {
        var queue = EventQueue<Event>(reservingCapacity: fleet.devices.count + 64)
        let width = scenario.bucket.nanoseconds
        var index: UInt32 = 0
        var boundary = width
        while boundary < fleet.end.nanoseconds {
            queue.schedule(.bucketEnd(index: index), at: Instant(nanoseconds: boundary))
            index += 1
            boundary += width
        }
        for (index, fault) in scenario.faults.enumerated() {
            queue.schedule(.fault(index: UInt16(index), ending: false), at: .zero + fault.at)
            if let duration = fault.duration, fault.at + duration < scenario.duration {
                queue.schedule(.fault(index: UInt16(index), ending: true), at: .zero + fault.at + duration)
            }
        }
        workflows?.scheduleFirstStarts(fleet, into: &queue)
        sync?.scheduleCampaigns(into: &queue)
        chat?.scheduleSetup(into: &queue)
        agent?.scheduleSessions(fleet, into: &queue)
        bridge?.scheduleSetup(into: &queue)
        desktop?.scheduleSetup(into: &queue)
        for index in fleet.devices.indices {
            let next = fleet.devices[index].nextWake(fleet.environment)
            if next < fleet.end { queue.schedule(.wake(device: UInt32(index), generation: 0), at: next) }
        }
        return queue
    }

    public mutating func handle(_ event: Event, at now: Instant, queue: inout EventQueue<Event>) {
        eventsInBucket &+= 1
        switch event {
        case .wake(let device, let generation):
            wake(Int(device), generation: generation, now: now, queue: &queue)
        case .bucketEnd(let index):
            closeBucket(startingAt: Int64(index) * scenario.bucket.nanoseconds, at: now)
        case .fault(let index, let ending):
            applyFault(Int(index), ending: ending, at: now, queue: &queue)
        case .push(let device, let stack):
            pushArrived(Int(device), from: stack, now: now, queue: &queue)
        case .workflows(let event):
            workflows?.handle(event, fleet: &fleet, now: now, queue: &queue)
        case .sync(let event):
            guard workflows != nil else { return }
            sync?.handle(event, fleet: &fleet, workflows: &workflows!, now: now, queue: &queue)
        case .chat(.talk(let user)):
            talk(Int(user), now: now, queue: &queue)
        case .chat(let event):
            chat?.handle(event, fleet: &fleet, now: now, queue: &queue)
        case .agent(.session(let device)):
            agentSession(Int(device), now: now, queue: &queue)
        case .agent(let event):
            agent?.handle(event, fleet: &fleet, now: now, queue: &queue)
        case .aiBridge(.prompt(let device)):
            bridgePrompt(Int(device), now: now, queue: &queue)
        case .aiBridge(let event):
            bridge?.handle(event, fleet: &fleet, now: now, queue: &queue)
        case .desktop(.prompt(let device)):
            desktopPrompt(Int(device), now: now, queue: &queue)
        case .desktop(let event):
            desktop?.handle(event, fleet: &fleet, now: now, queue: &queue)
        }
    }

    /// The user opens the app on `device` if it is not on screen (every stack sees the
    /// launch); false when it cannot open (a dead battery, a phone that is off).
    mutating func bringToScreen(_ device: Int, now: Instant, queue: inout EventQueue<Event>) -> Bool {
        guard fleet.devices[device].app != .foreground else { return true }
        guard fleet.devices[device].openApp(at: now, deviceClass: fleet.deviceClass(of: device), env: fleet.environment,
                                            tally: &fleet.tally, log: &fleet.log) else { return false }
        if !fleet.log.isEmpty { drainLog(device: device, at: now, queue: &queue) }
        reschedule(device, at: now, queue: &queue)
        return true
    }

    /// A user sends a prompt to their desktop: they open the app if it is not on screen.
    mutating func bridgePrompt(_ device: Int, now: Instant, queue: inout EventQueue<Event>) {
        guard bridge != nil, bridge!.promptDue(device, fleet: &fleet, now: now, queue: &queue) else { return }
        guard bringToScreen(device, now: now, queue: &queue) else { return }
        bridge!.prompt(device, fleet: &fleet, now: now, queue: &queue)
    }

    /// A user prompts their desktop from a phone: they open the app if it is not on screen.
    mutating func desktopPrompt(_ device: Int, now: Instant, queue: inout EventQueue<Event>) {
        guard desktop != nil, desktop!.promptDue(device, fleet: &fleet, now: now, queue: &queue) else { return }
        guard bringToScreen(device, now: now, queue: &queue) else { return }
        desktop!.prompt(device, fleet: &fleet, now: now, queue: &queue)
    }

    /// A user starts an agent chat: they open the app if it is not on screen (every stack
    /// sees the launch), then the chat starts (or, mid-chat, resumes).
    mutating func agentSession(_ device: Int, now: Instant, queue: inout EventQueue<Event>) {
        guard agent != nil, agent!.sessionDevice(device, fleet: &fleet, now: now, queue: &queue) != nil else { return }
        guard bringToScreen(device, now: now, queue: &queue) else { return }
        agent!.startChat(device, fleet: &fleet, now: now, queue: &queue)
    }

    /// A user writes: the chat stack picks the phone, the user opens the app on it if it is
    /// not on screen (every stack sees the launch), and the message goes out.
    mutating func talk(_ user: Int, now: Instant, queue: inout EventQueue<Event>) {
        guard chat != nil, let device = chat!.writer(user, fleet: &fleet, now: now, queue: &queue) else { return }
        guard bringToScreen(device, now: now, queue: &queue) else { return }
        chat!.talk(user, from: device, now: now, queue: &queue, fleet: &fleet)
    }

    /// A device's own wake-up: its model advances, what it observed goes to the stacks,
    /// its engine ticks (and syncs when due), and its next wake-up is scheduled.
    mutating func wake(_ device: Int, generation: UInt32, now: Instant, queue: inout EventQueue<Event>) {
        let deviceClass = fleet.deviceClass(of: device)
        // One in-place mutation per wake-up: reading a 300-byte device through the
        // array's getter would copy it.
        guard let ticked = fleet.devices[device].wakeIfCurrent(generation: generation, at: now, deviceClass: deviceClass,
                                                              env: fleet.environment, tally: &fleet.tally, log: &fleet.log) else { return }
        if !fleet.log.isEmpty { drainLog(device: device, at: now, queue: &queue) }
        var work = Instant.distantFuture
        if workflows?.runsEngine(device) == true {
            workflows!.engineTick(device, ticked: ticked, fleet: &fleet, now: now, queue: &queue)
            if ticked { sync?.syncIfDue(device, fleet: &fleet, workflows: &workflows!, now: now, queue: &queue) }
            work = workflows!.workDeadline(device, fleet: fleet, now: now)
        }
        let next = fleet.devices[device].scheduleAfter(workDeadline: work, env: fleet.environment)
        if next < fleet.end { queue.schedule(.wake(device: UInt32(device), generation: generation), at: next) }
    }

    /// A push reached a phone: the device model decides what it does (a background window
    /// for a suspended app), every stack sees what changed, the stack whose server pushed
    /// acts on it, and chat catches up in a window a push opened.
    mutating func pushArrived(_ device: Int, from stack: StackKind, now: Instant, queue: inout EventQueue<Event>) {
        let wake = fleet.devices[device].wakeForPush(at: now, deviceClass: fleet.deviceClass(of: device), env: fleet.environment,
                                                     tally: &fleet.tally, log: &fleet.log)
        if let handles = fleet.push.handles(stack) { fleet.recorder.add(handles[PushService.Outcome(wake)]) }
        if !fleet.log.isEmpty { drainLog(device: device, at: now, queue: &queue) }
        guard wake != .notRunning else { return }
        if stack == .sync, workflows != nil { sync?.pushArrived(device, fleet: &fleet, workflows: workflows!) }
        chat?.pushArrived(device, fleet: &fleet, now: now, queue: &queue)
        reschedule(device, at: now, queue: &queue)
    }

    /// Forgets a device's pending wake-up and schedules a fresh one (after an outside change).
    mutating func reschedule(_ device: Int, at now: Instant, queue: inout EventQueue<Event>) {
        if let workflows {
            workflows.reschedule(device, fleet: &fleet, now: now, queue: &queue)
        } else {
            fleet.reschedule(device, work: nil, at: now, queue: &queue)
        }
    }
}
