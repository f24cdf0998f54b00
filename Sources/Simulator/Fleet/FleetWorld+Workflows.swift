import DeviceWorkflows
import Orch8Wire
import LabKernel

/// The workflow layer of the fleet: each device's engine runs on the device's own ticks,
/// lives and dies with the app process, and keeps its state in a store that survives.
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
/// prompts again for the steps still waiting.
extension FleetWorld {
    /// Each device's first start of each of its workloads. Derived from streams of their
    /// own, so computing them touches no device state.
    func scheduleFirstStarts(into queue: inout EventQueue<Event>) {
        guard let settings = scenario.workflows else { return }
        for device in engines.indices {
            guard let slot = engines[device] else { continue }
            for workload in workloadsOfClass[Int(classOfDevice[device])] {
                var generator = slot.seed.child("first-start").child(UInt64(workload)).generator()
                let at = Instant.zero + Self.gap(before: settings.workloads[workload].start, first: true, using: &generator)
                if at < end { queue.schedule(.workflowStart(device: UInt32(device), workload: UInt16(workload)), at: at) }
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

    mutating func workflowStart(_ device: Int, workload: Int, now: Instant, queue: inout EventQueue<Event>) {
        guard let settings = scenario.workflows, let metrics = workflowMetrics else { return }
        let next = now + Self.gap(before: settings.workloads[workload].start, first: false, using: &engines[device]!.generator)
        if next < end { queue.schedule(.workflowStart(device: UInt32(device), workload: UInt16(workload)), at: next) }
        switch devices[device].app {
        case .poweredOff:
            recorder.add(metrics.rejected[1])
        case .killed:
            if engines[device]!.queuedStarts.count < DeviceEngine.maxQueuedStarts {
                engines[device]!.queuedStarts.append(workload)
            } else {
                recorder.add(metrics.rejected[2])
            }
        case .foreground, .background:
            // Apps running when the run begins had no launch event: their engine starts
            // with their first workflow (its store is empty, so nothing is owed earlier).
            if !engines[device]!.isRunning { launchEngine(device, now: now, queue: &queue) }
            startInstance(device, workload: workload, now: now, queue: &queue)
            reschedule(device, at: now, queue: &queue)
        }
    }

    mutating func handlerDone(_ device: Int, token: UInt32, now: Instant, queue: inout EventQueue<Event>) {
        // A kill empties `handlers`: the result of a handler of a dead process is gone.
        guard let slot = engines[device], let pending = slot.handlers.removeValue(forKey: token), slot.isRunning else { return }
        var effects: [EngineEffect] = []
        slot.live!.handlerFinished(pending.key, pending.outcome, now: now, into: &effects)
        process(effects, device: device, now: now, queue: &queue)
        reschedule(device, at: now, queue: &queue)
    }

    mutating func answer(_ device: Int, token: UInt32, now: Instant, queue: inout EventQueue<Event>) {
        guard let metrics = workflowMetrics,
              let slot = engines[device], let pending = slot.answers.removeValue(forKey: token), slot.isRunning else { return }
        var effects: [EngineEffect] = []
        do {
            try slot.live!.completeStep(pending.instanceID, stepName: pending.step, output: .string(pending.value),
                                                      now: now, into: &effects)
            recorder.add(metrics.answers[0])
            if let slot = pending.slot { recorder.observe(metrics.inputWait[slot], UInt64(max(0, (now - pending.promptedAt).nanoseconds))) }
        } catch {
            // The instance ended while the person thought (its lifetime ran out).
            recorder.add(metrics.answers[2])
        }
        process(effects, device: device, now: now, queue: &queue)
        reschedule(device, at: now, queue: &queue)
    }

    /// Runs the engine's tick if the device ticked and work is due; returns the engine's
    /// next work deadline (never before `now`).
    mutating func engineTick(_ device: Int, ticked: Bool, now: Instant, queue: inout EventQueue<Event>) -> Instant {
        let slot = engines[device]!
        if ticked, let deadline = slot.nextDeadline, deadline <= now {
            var effects: [EngineEffect] = []
            let cost = scenario.workflows?.instanceCost.nanoseconds ?? 0
            if cost > 0 {
                // maxTickDurationMs against modelled time: each instance advanced costs `cost`.
                let budget = Int64(slot.peek { $0.config.maxTickDurationMs } ?? 0) * 1_000_000
                var used: Int64 = 0
                slot.live!.tick(now: now, into: &effects) {
                    defer { used += cost }
                    return used >= budget
                }
            } else {
                slot.live!.tick(now: now, into: &effects)
            }
            if let metrics = workflowMetrics { recorder.add(metrics.executedTicks[Int(devices[device].power.rawValue)]) }
            process(effects, device: device, now: now, queue: &queue)
        }
        if ticked { syncIfDue(device, now: now, queue: &queue) }
        return workDeadline(device, now: now)
    }

    /// The app process started or ended.
    mutating func appLifecycle(_ device: Int, from: AppState, to: AppState, now: Instant, queue: inout EventQueue<Event>) {
        switch (Self.isRunning(from), Self.isRunning(to)) {
        case (true, false):
            guard let metrics = workflowMetrics else { return }
            let (handlers, answers) = engines[device]!.kill()
            recorder.add(metrics.lostHandlers, Double(handlers))
            recorder.add(metrics.answers[2], Double(answers))
            devices[device].workDeadline = .distantFuture
        case (false, true):
            launchEngine(device, now: now, queue: &queue)
        case (true, true), (false, false):
            break
        }
    }

    // MARK: The engine's life

    /// A fresh process: the engine is restored from the store, loads the device's
    /// sequences that are not stored yet, prompts again for steps still waiting, and runs
    /// the starts that queued while the app was not running.
    mutating func launchEngine(_ device: Int, now: Instant, queue: inout EventQueue<Event>) {
        guard let settings = scenario.workflows, let catalog = workflowCatalog, let metrics = workflowMetrics else { return }
        let launch = engines[device]!.launches
        engines[device]!.launches += 1
        var engine = MobileEngine(config: settings.engine, handlers: catalog.handlerNames,
                                  seed: engines[device]!.seed.child("launch").child(launch), wallClock: engineClock)
        engine.reportPowerState(devices[device].power)
        engine.resume()
        var effects: [EngineEffect] = []
        if let stored = try? engines[device]!.store.loadState(), !stored.sequences.isEmpty {
            _ = engine.restore(stored, compiled: catalog.byJSON, now: now, into: &effects)
            if engine.activeCount > 0 { recorder.add(metrics.recoveries) }
        }
        for workload in workloadsOfClass[Int(classOfDevice[device])] {
            for sequence in catalog.sequencesOfWorkload[workload] where engine.sequence(named: sequence.name, version: sequence.version) == nil {
                _ = try? engine.loadSequence(sequence, into: &effects)
            }
        }
        let waiting = engine.waitingSteps()
        engines[device]!.live = consume engine
        if syncSim != nil {
            engines[device]!.syncClient = SyncClient(config: SyncClient.Config(deviceID: Self.syncDeviceID(device)),
                                                     baseTickMs: settings.engine.tickIntervalMs,
                                                     seed: engines[device]!.seed.child("sync").child(launch))
            engines[device]!.inFlight = nil
        }
        process(effects, device: device, now: now, queue: &queue)
        for (instanceID, step) in waiting {
            prompt(device, instanceID: instanceID.text, step: step, now: now, queue: &queue)
        }
        let queued = engines[device]!.queuedStarts
        engines[device]!.queuedStarts.removeAll()
        for workload in queued { startInstance(device, workload: workload, now: now, queue: &queue) }
    }

    mutating func startInstance(_ device: Int, workload: Int, now: Instant, queue: inout EventQueue<Event>) {
        guard let settings = scenario.workflows, let metrics = workflowMetrics else { return }
        let spec = settings.workloads[workload]
        var effects: [EngineEffect] = []
        do {
            _ = try engines[device]!.live!.start(spec.sequenceName, input: spec.input, now: now, into: &effects)
            if let slot = metrics.slot(spec.sequenceName) { recorder.add(metrics.started[slot]) }
            activeTopLevel[device] += 1
        } catch {
            recorder.add(metrics.rejected[0])
        }
        process(effects, device: device, now: now, queue: &queue)
    }

    /// Acts on the engine's effects in order.
    mutating func process(_ effects: [EngineEffect], device: Int, now: Instant, queue: inout EventQueue<Event>) {
        for effect in effects {
            switch effect {
            case .persist(let snapshot):
                try? engines[device]!.store.apply(effect)
                if syncSim != nil, snapshot.instance.parent == nil {
                    var slot = engines[device]!
                    slot.clock = now
                    try? slot.queueStatus(snapshot.instance.instanceID)
                }
            case .delete, .storeSequence, .removeSequence, .telemetry:
                try? engines[device]!.store.apply(effect)
            case .invoke(let invocation):
                if syncSim != nil, SyncOutboxWriter.delegates(invocation) {
                    var slot = engines[device]!
                    slot.clock = now
                    try? slot.queueDelegation(invocation)
                    continue
                }
                invoke(invocation, device: device, now: now, queue: &queue)
            case .instanceCompleted(let id, _):
                finished(device, instanceID: id.text, now: now)
            case .instanceFailed(let id, _):
                finished(device, instanceID: id.text, now: now)
            case .stepPending(let id, let step, _):
                prompt(device, instanceID: id.text, step: step, now: now, queue: &queue)
            }
        }
    }

    /// Runs the handler model: the outcome is drawn now and delivered after the duration.
    mutating func invoke(_ invocation: HandlerInvocation, device: Int, now: Instant, queue: inout EventQueue<Event>) {
        guard let settings = scenario.workflows, let metrics = workflowMetrics else { return }
        let model = settings.handler(invocation.handler)
        let fails = engines[device]!.generator.chance(model.failureRate)
        let duration = model.duration.sampleSpan(using: &engines[device]!.generator)
        let outcome: HandlerOutcome
        if fails {
            outcome = .retryable("simulated failure (failureRate \(model.failureRate))")
        } else if let handler = BuiltinHandlers.all[invocation.handler] {
            outcome = handler(HandlerCall(invocation: invocation, now: now + duration, wallClock: engineClock))
        } else {
            outcome = .success([:])
        }
        let token = engines[device]!.token()
        engines[device]!.handlers[token] = DeviceEngine.PendingHandler(key: invocation.key, outcome: outcome)
        queue.schedule(.handlerDone(device: UInt32(device), token: token), at: now + duration)
        if let slot = metrics.slot(invocation.sequenceName) {
            recorder.add(metrics.steps[slot])
            if invocation.key.attempt > 1 { recorder.add(metrics.retries[slot]) }
        }
    }

    /// A step waits for a person: they answer after their think time, or never.
    mutating func prompt(_ device: Int, instanceID: String, step: String, now: Instant, queue: inout EventQueue<Event>) {
        guard let catalog = workflowCatalog, let metrics = workflowMetrics,
              let sequence = engines[device]!.instanceFacts(instanceID)?.sequence else { return }
        // With sync, a gate the workload does not answer on the phone goes to the operator.
        if syncSim != nil, !catalog.answeredOnDevice(sequence: sequence, step: step) {
            var slot = engines[device]!
            slot.clock = now
            try? slot.queueApproval(instanceID, step: step)
            if slot.prompts["\(instanceID):\(step)"] == nil { slot.prompts["\(instanceID):\(step)"] = now }
            return
        }
        let model = catalog.answerModel(sequence: sequence, step: step)
        if engines[device]!.generator.chance(model.neverAnswer) {
            recorder.add(metrics.answers[1])
            return
        }
        var value = engines[device]!.firstChoice(sequence: sequence, step: step) ?? "yes"
        if !model.choices.isEmpty {
            var draw = engines[device]!.generator.next(below: UInt64(Ratio.partsPerBillion))
            for choice in model.choices {
                let share = UInt64(choice.ratio.numerator) * UInt64(Ratio.partsPerBillion) / UInt64(choice.ratio.denominator)
                value = choice.value
                if draw < share { break }
                draw -= share
            }
        }
        let think = model.thinkTime.sampleSpan(using: &engines[device]!.generator)
        let token = engines[device]!.token()
        engines[device]!.answers[token] = DeviceEngine.PendingAnswer(instanceID: instanceID, step: step, value: value,
                                                                      promptedAt: now, slot: metrics.slot(sequence))
        queue.schedule(.answer(device: UInt32(device), token: token), at: now + think)
    }

    /// Records a finished instance; sub-sequence children count only through their parent.
    mutating func finished(_ device: Int, instanceID: String, now: Instant) {
        guard let metrics = workflowMetrics, let instance = engines[device]!.instanceFacts(instanceID), instance.topLevel,
              let slot = metrics.slot(instance.sequence) else { return }
        let outcome: Int
        switch instance.state {
        case .completed: outcome = 0
        case .failed: outcome = 1
        case .cancelled: outcome = 2
        case .scheduled, .running, .waiting, .paused: return
        }
        activeTopLevel[device] -= 1
        recorder.add(metrics.finished[slot][outcome])
        recorder.observe(metrics.duration[slot][outcome], UInt64(max(0, (now - instance.createdAt).nanoseconds)))
        for step in engines[device]!.stepDurations(of: instanceID) where !step.waited {
            if let handle = metrics.stepLatency[slot][step.step] { recorder.observe(handle, UInt64(max(0, step.duration.nanoseconds))) }
        }
    }
}
