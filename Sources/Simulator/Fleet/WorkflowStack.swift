import DeviceWorkflows
import Orch8Wire
public import LabKernel

/// The workflow stack of the fleet: each device's orch8 engine runs on the device's own
/// ticks, lives and dies with the app process, and keeps its state in a store that
/// survives.
///
/// Theory of operation: a workload's starts arrive as events (periodic from a random
/// phase, or Poisson). A running app starts the instance at once; a killed one queues the
/// start for its next launch; a phone that is off refuses it. The engine's effects are
/// acted on where they happen: storage effects go to the device's store, an invocation
/// becomes a `handlerDone` event after the handler model's duration, a prompt becomes an
/// `answer` event after the person's think time. Between those, the engine only works on
/// ticks: its next deadline becomes the device's work deadline, and in fast-forward mode
/// the first tick at or after it is executed while the idle ones are counted in bulk.
/// Killing the app drops the engine, its handlers in flight and unanswered prompts; the
/// next launch restores the engine from the store, re-runs the interrupted steps and
/// prompts again for the steps still waiting. With sync on, each launch also makes the
/// engine's `SyncClient` (the sync stack moves its requests).
public struct WorkflowStack {
    public enum Event: Sendable {
        /// A device's workload starts a workflow.
        case start(device: UInt32, workload: UInt16)
        /// A handler a device's engine called has finished (its outcome waits in the slot).
        case handlerDone(device: UInt32, token: UInt32)
        /// A person answers a prompt on a device.
        case answer(device: UInt32, token: UInt32)
    }

    let settings: WorkflowSettings
    let catalog: WorkflowCatalog
    let metrics: WorkflowMetrics
    let instancesAccounted: Int
    /// Each device's engine slot; nil for devices of populations without workloads.
    var engines: [DeviceEngine?] = []
    /// Workload indices that apply to each device class.
    let workloadsOfClass: [[Int]]
    /// Top-level active instances per device, as last seen (dead engines keep theirs).
    var activeTopLevel: [Int32] = []

    init(_ settings: WorkflowSettings, fleet: inout Fleet) {
        self.settings = settings
        catalog = WorkflowCatalog(settings)
        metrics = WorkflowMetrics(sequences: catalog.stepsOfWorkloads, recorder: &fleet.recorder)
        instancesAccounted = fleet.invariants.register("workflow.instances_accounted")
        workloadsOfClass = fleet.classes.map { deviceClass in
            settings.workloads.indices.filter { settings.workloads[$0].populations.isEmpty || settings.workloads[$0].populations.contains(deviceClass.name) }
        }
        engines.reserveCapacity(fleet.devices.count)
        for device in fleet.devices.indices {
            let deviceClass = fleet.deviceClass(of: device)
            guard deviceClass.stacks.contains(.workflows), !workloadsOfClass[Int(fleet.classOfDevice[device])].isEmpty else {
                engines.append(nil)
                activeTopLevel.append(0)
                continue
            }
            let engine = DeviceEngine(seed: fleet.root.child(.workload).child(deviceClass.name).child(UInt64(fleet.memberOfDevice[device])),
                                      wallClock: fleet.engineClock)
            // The engine reports to a sync server when the population runs sync.
            engine.syncing = deviceClass.stacks.contains(.sync) && fleet.scenario.sync != nil
            engines.append(engine)
            activeTopLevel.append(0)
        }
    }

    func runsEngine(_ device: Int) -> Bool { engines[device] != nil }

    /// Each device's first start of each of its workloads. Derived from streams of their
    /// own, so computing them touches no device state.
    func scheduleFirstStarts(_ fleet: Fleet, into queue: inout EventQueue<FleetWorld.Event>) {
        for device in engines.indices {
            guard let slot = engines[device] else { continue }
            for workload in workloadsOfClass[Int(fleet.classOfDevice[device])] {
                var generator = slot.seed.child("first-start").child(UInt64(workload)).generator()
                let at = Instant.zero + Self.gap(before: settings.workloads[workload].start, first: true, using: &generator)
                if at < fleet.end { queue.schedule(.workflows(.start(device: UInt32(device), workload: UInt16(workload))), at: at) }
            }
        }
    }

    static func gap(before rate: StartRate, first: Bool, using generator: inout SeededGenerator) -> TimeSpan {
        switch rate {
        case .every(let period):
            return first ? TimeSpan(nanoseconds: Int64(generator.next(below: UInt64(period.nanoseconds)))) : period
        case .poisson(let mean):
            return Distribution.exponential(mean: Double(mean.nanoseconds) / 1e9).sampleSpan(using: &generator)
        }
    }

    static func isRunning(_ app: AppState) -> Bool { app == .foreground || app == .background }

    // MARK: Events

    mutating func handle(_ event: Event, fleet: inout Fleet, now: Instant, queue: inout EventQueue<FleetWorld.Event>) {
        switch event {
        case .start(let device, let workload): start(Int(device), workload: Int(workload), fleet: &fleet, now: now, queue: &queue)
        case .handlerDone(let device, let token): handlerDone(Int(device), token: token, fleet: &fleet, now: now, queue: &queue)
        case .answer(let device, let token): answer(Int(device), token: token, fleet: &fleet, now: now, queue: &queue)
        }
    }

    mutating func start(_ device: Int, workload: Int, fleet: inout Fleet, now: Instant, queue: inout EventQueue<FleetWorld.Event>) {
        let next = now + Self.gap(before: settings.workloads[workload].start, first: false, using: &engines[device]!.generator)
        if next < fleet.end { queue.schedule(.workflows(.start(device: UInt32(device), workload: UInt16(workload))), at: next) }
        switch fleet.devices[device].app {
        case .poweredOff:
            fleet.recorder.add(metrics.rejected[.deviceOff])
        case .killed:
            if engines[device]!.queuedStarts.count < DeviceEngine.maxQueuedStarts {
                engines[device]!.queuedStarts.append(workload)
            } else {
                fleet.recorder.add(metrics.rejected[.queueFull])
            }
        case .foreground, .background:
            // Apps running when the run begins had no launch event: their engine starts
            // with their first workflow (its store is empty, so nothing is owed earlier).
            if !engines[device]!.isRunning { launchEngine(device, fleet: &fleet, now: now, queue: &queue) }
            startInstance(device, workload: workload, fleet: &fleet, now: now, queue: &queue)
            reschedule(device, fleet: &fleet, now: now, queue: &queue)
        }
    }

    mutating func handlerDone(_ device: Int, token: UInt32, fleet: inout Fleet, now: Instant, queue: inout EventQueue<FleetWorld.Event>) {
        // A kill empties `handlers`: the result of a handler of a dead process is gone.
        guard let slot = engines[device], let pending = slot.handlers.removeValue(forKey: token), slot.isRunning else { return }
        var effects: [EngineEffect] = []
        slot.engine.handlerFinished(pending.key, pending.outcome, now: now, into: &effects)
        process(effects, device: device, fleet: &fleet, now: now, queue: &queue)
        reschedule(device, fleet: &fleet, now: now, queue: &queue)
    }

    mutating func answer(_ device: Int, token: UInt32, fleet: inout Fleet, now: Instant, queue: inout EventQueue<FleetWorld.Event>) {
        guard let slot = engines[device], let pending = slot.answers.removeValue(forKey: token), slot.isRunning else { return }
        var effects: [EngineEffect] = []
        do {
            try slot.engine.completeStep(pending.instanceID, stepName: pending.step, output: .string(pending.value), now: now, into: &effects)
            fleet.recorder.add(metrics.answers[.answered])
            if let slot = pending.slot { fleet.recorder.observe(metrics.inputWait[slot], UInt64(max(0, (now - pending.promptedAt).nanoseconds))) }
        } catch {
            // The instance ended while the person thought (its lifetime ran out).
            fleet.recorder.add(metrics.answers[.lost])
        }
        process(effects, device: device, fleet: &fleet, now: now, queue: &queue)
        reschedule(device, fleet: &fleet, now: now, queue: &queue)
    }

    // MARK: The phone

    /// The app process started or ended.
    mutating func appLifecycle(_ device: Int, from: AppState, to: AppState, fleet: inout Fleet, now: Instant,
                               queue: inout EventQueue<FleetWorld.Event>) {
        guard engines[device] != nil else { return }
        switch (Self.isRunning(from), Self.isRunning(to)) {
        case (true, false):
            let (handlers, answers) = engines[device]!.kill()
            fleet.recorder.add(metrics.lostHandlers, Double(handlers))
            fleet.recorder.add(metrics.answers[.lost], Double(answers))
            fleet.devices[device].workDeadline = .distantFuture
        case (false, true):
            launchEngine(device, fleet: &fleet, now: now, queue: &queue)
        case (true, true), (false, false):
            break
        }
    }

    /// The instances a device's engine holds, running or (app dead) in its store.
    func storedInstances(_ device: Int) -> Int {
        guard let slot = engines[device] else { return 0 }
        return slot.isRunning ? (slot.peek { $0.allInstances.count } ?? 0) : slot.store.storedInstanceCount
    }

    func powerChanged(_ device: Int, to state: PowerState) { engines[device]?.process?.engine.reportPowerState(state) }

    /// When the device next has work: its engine's deadline or its next sync, never before now.
    func workDeadline(_ device: Int, fleet: Fleet, now: Instant) -> Instant {
        var deadline = engines[device]?.nextDeadline ?? .distantFuture
        if let sync = engines[device]?.syncDeadline(fleet, device: device, now: now) { deadline = min(deadline, sync) }
        return max(deadline, now)
    }

    /// Forgets a device's pending wake-up and schedules a fresh one at its work deadline.
    func reschedule(_ device: Int, fleet: inout Fleet, now: Instant, queue: inout EventQueue<FleetWorld.Event>) {
        fleet.reschedule(device, work: engines[device] == nil ? nil : workDeadline(device, fleet: fleet, now: now), at: now, queue: &queue)
    }

    // MARK: Buckets and the run's end

    func closeBucket(fleet: inout Fleet) {
        fleet.recorder.set(metrics.active, Double(activeTopLevel.reduce(0) { $0 + Int($1) }))
    }

    /// Every instance started is finished or still active.
    func finish(fleet: inout Fleet) {
        let started = metrics.started.reduce(0.0) { $0 + fleet.recorder.totals[$1.id] }
        let finished = metrics.finished.flatMap(\.all).reduce(0.0) { $0 + fleet.recorder.totals[$1.id] }
        let active = Double(activeTopLevel.reduce(0) { $0 + Int($1) })
        fleet.invariants.check(instancesAccounted, started == finished + active,
                               "\(Int(started)) instances started, \(Int(finished)) finished, \(Int(active)) still active at the end")
    }
}
