import DeviceWorkflows
import Orch8Wire
public import LabKernel
public import LabStore

/// The simulated fleet: every device of a scenario, the recorder and the fault schedule.
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
        /// A device's workload starts a workflow.
        case workflowStart(device: UInt32, workload: UInt16)
        /// A handler a device's engine called has finished (its outcome waits in the slot).
        case handlerDone(device: UInt32, token: UInt32)
        /// A person answers a prompt on a device.
        case answer(device: UInt32, token: UInt32)
        /// A sync message crossed the virtual network.
        case net(slot: UInt32)
        /// A server worker finished a request (void if the server crashed since `epoch`).
        case serviceDone(token: UInt32, epoch: UInt32)
        case syncTimeout(token: UInt32)
        /// A silent push reached a phone.
        case push(device: UInt32)
        /// The operator resolves an approval on the dashboard.
        case operatorResolve(task: UInt32)
        case campaign(index: UInt16)
        /// Chat: a request, socket or frame arriving; a client's timer; a user talking; a setup phase.
        case chat(slot: UInt32)
        case chatTimer(device: UInt32, generation: UInt32)
        case chatTalk(user: UInt32)
        case chatSetup(phase: UInt8)
        /// A user does something besides sending (`ChatAction`), or a follow-up falls due.
        case chatAction(user: UInt32, kind: UInt8)
        case chatFollowUp(slot: UInt32)
    }

    public internal(set) var devices: [VirtualDevice] = []
    /// Each device's class, beside the devices so a wake-up reads it without touching them.
    var classOfDevice: [UInt16] = []
    public let classes: [DeviceClass]
    public let environment: DeviceEnvironment
    public let scenario: Scenario
    public internal(set) var recorder = Recorder()
    public internal(set) var invariants = InvariantLedger()
    public internal(set) var sampler: EventSampler
    var tally = FleetTally()
    var log: [DeviceObservation] = []
    var metrics: FleetMetrics
    var invariantIDs: FleetInvariants
    var eventsInBucket: UInt64 = 0
    let root: StreamSeed
    let end: Instant
    /// Receives each closed bucket's rows (the results writer); nil in model-only runs.
    let sink: (@Sendable (ResultsBatch) -> Void)?
    /// Each device's workflow engine slot; empty when the scenario has no workflows.
    var engines: [DeviceEngine?] = []
    /// Workload indices that apply to each device class.
    var workloadsOfClass: [[Int]] = []
    var workflowMetrics: WorkflowMetrics?
    var workflowCatalog: WorkflowCatalog?
    var instancesAccounted = 0
    /// Top-level active instances per device, as last seen (dead engines keep theirs).
    var activeTopLevel: [Int32] = []
    let engineClock: WallClockOrigin
    /// `faults.active` by fault kind; the faults in force, and the kinds seen this bucket.
    var faultGauges: [String: MetricHandle] = [:]
    var faultsInForce: Set<Int> = []
    var faultKindsInBucket: Set<String> = []
    var syncSim: SyncSimulation?
    var chatSim: ChatSimulation?
    var syncMetrics: SyncMetrics?
    var syncInvariants: SyncInvariants?

    public init(scenario: Scenario, sink: (@Sendable (ResultsBatch) -> Void)?) {
        self.scenario = scenario
        self.root = StreamSeed(scenario.seed)
        self.end = .zero + scenario.duration
        self.sink = sink
        self.environment = DeviceEnvironment(clock: DayClock(startOffset: scenario.startAt), tickInterval: scenario.ticks.interval,
                                             mode: scenario.ticks.mode)
        self.engineClock = WallClockOrigin(unixMilliseconds: WallClockOrigin.simulationEpoch.unixMilliseconds + scenario.startAt.milliseconds)
        var first = 0
        var classes: [DeviceClass] = []
        for population in scenario.devices {
            classes.append(DeviceClass(name: population.name, count: population.count, firstDevice: first,
                                       power: population.power, lifecycle: population.lifecycle, network: population.network))
            first += population.count
        }
        self.classes = classes
        self.sampler = EventSampler(capacity: scenario.eventSample, seed: root.child(.recorder))
        var recorder = Recorder()
        self.metrics = FleetMetrics(recorder: &recorder)
        self.recorder = recorder
        var ledger = InvariantLedger()
        self.invariantIDs = FleetInvariants(ledger: &ledger)
        if let workflows = scenario.workflows {
            let catalog = WorkflowCatalog(workflows)
            workflowCatalog = catalog
            workflowMetrics = WorkflowMetrics(sequences: catalog.stepsOfWorkloads, recorder: &recorder)
            self.recorder = recorder
            instancesAccounted = ledger.register("workflow.instances_accounted")
            workloadsOfClass = classes.map { deviceClass in
                workflows.workloads.indices.filter { workflows.workloads[$0].populations.isEmpty || workflows.workloads[$0].populations.contains(deviceClass.name) }
            }
        }
        for kind in Set(scenario.faults.map(\.kind)).sorted() {
            faultGauges[kind] = recorder.register("faults.active", labels: [("kind", kind)])
        }
        self.recorder = recorder
        if scenario.sync != nil {
            syncMetrics = SyncMetrics(recorder: &recorder)
            self.recorder = recorder
            syncInvariants = SyncInvariants(ledger: &ledger)
        }
        self.invariants = ledger
        devices.reserveCapacity(first)
        let deviceRoot = root.child(.device)
        for (index, deviceClass) in classes.enumerated() {
            let classSeed = deviceRoot.child(deviceClass.name)
            for member in 0..<deviceClass.count {
                devices.append(VirtualDevice(deviceClass: deviceClass, classIndex: UInt16(index),
                                             seed: classSeed.child(UInt64(member)), environment: environment))
                classOfDevice.append(UInt16(index))
                if !workloadsOfClass.isEmpty {
                    engines.append(workloadsOfClass[index].isEmpty ? nil
                        : DeviceEngine(seed: root.child(.workload).child(deviceClass.name).child(UInt64(member)), wallClock: engineClock))
                    activeTopLevel.append(0)
                }
            }
        }
        if let sync = scenario.sync { setUpSync(sync) }
        if let chat = scenario.chat { setUpChat(chat) }
    }

    /// The events a run starts with: bucket ends, faults, then each device's first wake-up.
    public func initialEvents() -> EventQueue<Event> {
        var queue = EventQueue<Event>(reservingCapacity: devices.count + 64)
        let width = scenario.bucket.nanoseconds
        var index: UInt32 = 0
        var boundary = width
        while boundary < end.nanoseconds {
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
        scheduleFirstStarts(into: &queue)
        for (index, campaign) in (scenario.sync?.campaigns ?? []).enumerated() {
            queue.schedule(.campaign(index: UInt16(index)), at: .zero + campaign.at)
        }
        if scenario.chat != nil {
            for phase in 0..<4 { queue.schedule(.chatSetup(phase: UInt8(phase)), at: .zero + .seconds(1 + 60 * Int64(phase))) }
        }
        for index in devices.indices {
            let next = devices[index].nextWake(environment)
            if next < end { queue.schedule(.wake(device: UInt32(index), generation: 0), at: next) }
        }
        return queue
    }

    public mutating func handle(_ event: Event, at now: Instant, queue: inout EventQueue<Event>) {
        eventsInBucket &+= 1

        switch event {
        case .wake(let device, let generation):
            let index = Int(device)
            let deviceClass = classes[Int(classOfDevice[index])]
            // One in-place mutation per wake-up: reading a 300-byte device through the
            // array's getter would copy it.
            guard let ticked = devices[index].wakeIfCurrent(generation: generation, at: now, deviceClass: deviceClass,
                                                            env: environment, tally: &tally, log: &log) else { return }
            if !log.isEmpty { drainLog(device: index, at: now, queue: &queue) }
            var work = Instant.distantFuture
            if !engines.isEmpty, engines[index] != nil { work = engineTick(index, ticked: ticked, now: now, queue: &queue) }
            let next = devices[index].scheduleAfter(workDeadline: work, env: environment)
            if next < end { queue.schedule(.wake(device: device, generation: generation), at: next) }
        case .bucketEnd(let index):
            closeBucket(startingAt: Int64(index) * scenario.bucket.nanoseconds, at: now)
        case .fault(let index, let ending):
            applyFault(Int(index), ending: ending, at: now, queue: &queue)
        case .workflowStart(let device, let workload):
            workflowStart(Int(device), workload: Int(workload), now: now, queue: &queue)
        case .handlerDone(let device, let token):
            handlerDone(Int(device), token: token, now: now, queue: &queue)
        case .answer(let device, let token):
            answer(Int(device), token: token, now: now, queue: &queue)
        case .net(let slot):
            networkDelivered(slot: slot, now: now, queue: &queue)
        case .serviceDone(let token, let epoch):
            serviceDone(token, epoch: epoch, now: now, queue: &queue)
        case .syncTimeout(let token):
            syncTimedOut(token, now: now, queue: &queue)
        case .push(let device):
            pushArrived(Int(device), now: now, queue: &queue)
        case .operatorResolve(let task):
            operatorResolves(task, now: now, queue: &queue)
        case .campaign(let index):
            runCampaign(Int(index), now: now, queue: &queue)
        case .chat(let slot):
            chatArrived(slot, now: now, queue: &queue)
        case .chatTimer(let device, let generation):
            chatTimerFired(Int(device), generation: generation, now: now, queue: &queue)
        case .chatTalk(let user):
            chatTalk(Int(user), now: now, queue: &queue)
        case .chatSetup(let phase):
            chatSetup(phase, now: now, queue: &queue)
        case .chatAction(let user, let kind):
            chatAction(Int(user), ChatAction(rawValue: kind) ?? .presence, now: now, queue: &queue)
        case .chatFollowUp(let slot):
            chatFollowUp(slot, now: now, queue: &queue)
        }
    }

    /// Forgets a device's pending wake-up and schedules a fresh one (after an outside change).
    mutating func reschedule(_ index: Int, at now: Instant, queue: inout EventQueue<Event>) {
        if !engines.isEmpty, engines[index] != nil {
            devices[index].workDeadline = workDeadline(index, now: now)
        }
        let (next, generation) = devices[index].forgetScheduledWake(env: environment)
        if next < end { queue.schedule(.wake(device: UInt32(index), generation: generation), at: next) }
    }
}
