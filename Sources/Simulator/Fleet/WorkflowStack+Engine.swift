import DeviceWorkflows
import Orch8Wire
import LabKernel

/// The engine's life on a phone: launches, ticks, and what its effects become (handler
/// runs, people answering, statuses and approvals for the sync server).
extension WorkflowStack {
    /// Runs the engine's tick if the device ticked and work is due.
    mutating func engineTick(_ device: Int, ticked: Bool, fleet: inout Fleet, now: Instant, queue: inout EventQueue<FleetWorld.Event>) {
        let slot = engines[device]!
        guard ticked, let deadline = slot.nextDeadline, deadline <= now else { return }
        var effects: [EngineEffect] = []
        let cost = settings.instanceCost.nanoseconds
        if cost > 0 {
            // maxTickDurationMs against modelled time: each instance advanced costs `cost`.
            let budget = Int64(slot.peek { $0.config.maxTickDurationMs } ?? 0) * 1_000_000
            var used: Int64 = 0
            slot.engine.tick(now: now, into: &effects) {
                defer { used += cost }
                return used >= budget
            }
        } else {
            slot.engine.tick(now: now, into: &effects)
        }
        fleet.recorder.add(metrics.executedTicks[Int(fleet.devices[device].power.rawValue)])
        process(effects, device: device, fleet: &fleet, now: now, queue: &queue)
    }

    /// A fresh process: the engine is restored from the store, loads the device's
    /// sequences that are not stored yet, prompts again for steps still waiting, and runs
    /// the starts that queued while the app was not running.
    mutating func launchEngine(_ device: Int, fleet: inout Fleet, now: Instant, queue: inout EventQueue<FleetWorld.Event>) {
        let slot = engines[device]!
        let launch = slot.launches
        slot.launches += 1
        var engine = MobileEngine(config: settings.engine, handlers: catalog.handlerNames, seed: slot.seed.child("launch").child(launch),
                                  wallClock: fleet.engineClock)
        engine.reportPowerState(fleet.devices[device].power)
        engine.resume()
        var effects: [EngineEffect] = []
        if let stored = try? slot.store.loadState(), !stored.sequences.isEmpty {
            _ = engine.restore(stored, compiled: catalog.byJSON, now: now, into: &effects)
            if engine.activeCount > 0 { fleet.recorder.add(metrics.recoveries) }
        }
        for workload in workloadsOfClass[Int(fleet.classOfDevice[device])] {
            for sequence in catalog.sequencesOfWorkload[workload] where engine.sequence(named: sequence.name, version: sequence.version) == nil {
                _ = try? engine.loadSequence(sequence, into: &effects)
            }
        }
        let waiting = engine.waitingSteps()
        slot.process = DeviceEngine.AppProcess(engine: engine)
        if slot.syncing {
            slot.syncClient = SyncClient(config: SyncClient.Config(deviceID: fleet.deviceName(device)), baseTickMs: settings.engine.tickIntervalMs,
                                         seed: slot.seed.child("sync").child(launch))
            slot.inFlight = nil
        }
        process(effects, device: device, fleet: &fleet, now: now, queue: &queue)
        for (instanceID, step) in waiting {
            prompt(device, instanceID: instanceID.text, step: step, fleet: &fleet, now: now, queue: &queue)
        }
        let queued = slot.queuedStarts
        slot.queuedStarts.removeAll()
        for workload in queued { startInstance(device, workload: workload, fleet: &fleet, now: now, queue: &queue) }
    }

    mutating func startInstance(_ device: Int, workload: Int, fleet: inout Fleet, now: Instant, queue: inout EventQueue<FleetWorld.Event>) {
        let spec = settings.workloads[workload]
        var effects: [EngineEffect] = []
        do {
            _ = try engines[device]!.engine.start(spec.sequenceName, input: spec.input, now: now, into: &effects)
            if let slot = metrics.slot(spec.sequenceName) { fleet.recorder.add(metrics.started[slot]) }
            activeTopLevel[device] += 1
        } catch {
            fleet.recorder.add(metrics.rejected[.resourceLimit])
        }
        process(effects, device: device, fleet: &fleet, now: now, queue: &queue)
    }

    /// Acts on the engine's effects in order.
    mutating func process(_ effects: [EngineEffect], device: Int, fleet: inout Fleet, now: Instant, queue: inout EventQueue<FleetWorld.Event>) {
        for effect in effects {
            switch effect {
            case .persist(let snapshot):
                try? engines[device]!.store.apply(effect)
                if engines[device]!.syncing, snapshot.instance.parent == nil {
                    let slot = engines[device]!
                    slot.clock = now
                    try? slot.queueStatus(of: snapshot.instance)
                }
            case .delete, .storeSequence, .removeSequence, .telemetry:
                try? engines[device]!.store.apply(effect)
            case .invoke(let invocation):
                if engines[device]!.syncing, SyncOutboxWriter.delegates(invocation) {
                    var slot = engines[device]!
                    slot.clock = now
                    try? slot.queueDelegation(invocation)
                    continue
                }
                invoke(invocation, device: device, fleet: &fleet, now: now, queue: &queue)
            case .instanceCompleted(let id, _):
                finished(device, instanceID: id.text, fleet: &fleet, now: now)
            case .instanceFailed(let id, _):
                finished(device, instanceID: id.text, fleet: &fleet, now: now)
            case .stepPending(let id, let step, _):
                prompt(device, instanceID: id.text, step: step, fleet: &fleet, now: now, queue: &queue)
            }
        }
    }

    /// Runs the handler model: the outcome is drawn now and delivered after the duration.
    mutating func invoke(_ invocation: HandlerInvocation, device: Int, fleet: inout Fleet, now: Instant,
                         queue: inout EventQueue<FleetWorld.Event>) {
        let slot = engines[device]!
        let model = settings.handler(invocation.handler)
        let fails = slot.generator.chance(model.failureRate)
        let duration = model.duration.sampleSpan(using: &slot.generator)
        let outcome: HandlerOutcome
        if fails {
            outcome = .retryable("simulated failure (failureRate \(model.failureRate))")
        } else if let handler = BuiltinHandlers.all[invocation.handler] {
            outcome = handler(HandlerCall(invocation: invocation, now: now + duration, wallClock: fleet.engineClock))
        } else {
            outcome = .success([:])
        }
        let token = slot.token()
        slot.handlers[token] = DeviceEngine.PendingHandler(key: invocation.key, outcome: outcome)
        queue.schedule(.workflows(.handlerDone(device: UInt32(device), token: token)), at: now + duration)
        fleet.compute(device, millijoules: fleet.energy.settings.cpu.step, stack: .workflows, at: now, queue: &queue)
        if let sequence = metrics.slot(invocation.sequenceName) {
            fleet.recorder.add(metrics.steps[sequence])
            if invocation.key.attempt > 1 { fleet.recorder.add(metrics.retries[sequence]) }
        }
    }

    /// A step waits for a person: they answer after their think time, or never. With sync
    /// on, a gate the workload does not answer on the phone goes to the server's operator.
    mutating func prompt(_ device: Int, instanceID: String, step: String, fleet: inout Fleet, now: Instant,
                         queue: inout EventQueue<FleetWorld.Event>) {
        let slot = engines[device]!
        guard let sequence = slot.instanceFacts(instanceID)?.sequence else { return }
        if slot.syncing, !catalog.answeredOnDevice(sequence: sequence, step: step) {
            var driver = slot
            driver.clock = now
            try? driver.queueApproval(instanceID, step: step)
            if slot.prompts["\(instanceID):\(step)"] == nil { slot.prompts["\(instanceID):\(step)"] = now }
            return
        }
        let model = catalog.answerModel(sequence: sequence, step: step)
        if slot.generator.chance(model.neverAnswer) {
            fleet.recorder.add(metrics.answers[.never])
            return
        }
        var value = slot.firstChoice(sequence: sequence, step: step) ?? "yes"
        if !model.choices.isEmpty { value = SyncStack.choose(model.choices, using: &slot.generator) }
        let think = model.thinkTime.sampleSpan(using: &slot.generator)
        let token = slot.token()
        slot.answers[token] = DeviceEngine.PendingAnswer(instanceID: instanceID, step: step, value: value, promptedAt: now,
                                                         slot: metrics.slot(sequence))
        queue.schedule(.workflows(.answer(device: UInt32(device), token: token)), at: now + think)
    }

    /// Records a finished instance; sub-sequence children count only through their parent.
    mutating func finished(_ device: Int, instanceID: String, fleet: inout Fleet, now: Instant) {
        guard let instance = engines[device]!.instanceFacts(instanceID), instance.topLevel, let slot = metrics.slot(instance.sequence) else { return }
        let outcome: WorkflowMetrics.Outcome
        switch instance.state {
        case .completed: outcome = .completed
        case .failed: outcome = .failed
        case .cancelled: outcome = .cancelled
        case .scheduled, .running, .waiting, .paused: return
        }
        activeTopLevel[device] -= 1
        fleet.recorder.add(metrics.finished[slot][outcome])
        fleet.recorder.observe(metrics.duration[slot][outcome], UInt64(max(0, (now - instance.createdAt).nanoseconds)))
        for step in engines[device]!.stepDurations(of: instanceID) where !step.waited {
            if let handle = metrics.stepLatency[slot][step.step] { fleet.recorder.observe(handle, UInt64(max(0, step.duration.nanoseconds))) }
        }
    }
}
