public import LabKernel
public import LabStore

extension FleetWorld {
    /// Turns a device's observations into metrics, samples and invariant checks, and
    /// hands each to the stacks it concerns.
    mutating func drainLog(device: Int, at now: Instant, queue: inout EventQueue<Event>) {
        let observations = fleet.log
        fleet.log.removeAll(keepingCapacity: true)
        for observation in observations {
            switch observation {
            case .lifecycle(let from, let to, let cause):
                let (wasRunning, running) = (WorkflowStack.isRunning(from), WorkflowStack.isRunning(to))
                workflows?.appLifecycle(device, from: from, to: to, fleet: &fleet, now: now, queue: &queue)
                chat?.follow(device, fleet: &fleet, now: now, queue: &queue)
                agent?.follow(device, fleet: &fleet, now: now, queue: &queue)
                bridge?.follow(device, fleet: &fleet)
                desktop?.follow(device, fleet: &fleet, now: now, queue: &queue)
                // What the dead app left in storage, and what the next launch restored from it.
                if wasRunning && !running && survivesRelaunch != nil { storedAtKill[device] = storedFacts(device) }
                if !wasRunning && running, let id = survivesRelaunch, let before = storedAtKill.removeValue(forKey: device) {
                    let after = storedFacts(device)
                    fleet.invariants.check(id, after.covers(before), "device \(device) at \(now): stored \(before) when its app died, restored \(after)")
                }
                fleet.recorder.add(metrics.transitions[Int(cause.rawValue)])
                fleet.invariants.check(invariantIDs.lifecycleTransitionValid, Self.isValid(from: from, to: to, cause: cause),
                                       "device \(device) at \(now): \(from) -> \(to) by \(cause)")
                fleet.sampler.offer(at: now, device: fleet.fleetIndex(device), kind: "lifecycle") { "\(from) -> \(to) (\(cause))" }
            case .power(let from, let to):
                fleet.recorder.add(metrics.powerTransitions[Int(to.rawValue)])
                workflows?.powerChanged(device, to: to)
                fleet.sampler.offer(at: now, device: fleet.fleetIndex(device), kind: "power") { "\(from) -> \(to)" }
            case .charger(let plugged, let overnight):
                if plugged { fleet.recorder.add(metrics.plugs[overnight ? 0 : 1]) }
                fleet.sampler.offer(at: now, device: fleet.fleetIndex(device), kind: "charger") {
                    (plugged ? "plugged in" : "unplugged") + (overnight ? " (overnight)" : " (top-up)")
                }
            case .network(let from, let to):
                fleet.recorder.add(metrics.networkChanges[Int(to.rawValue)])
                sync?.networkChanged(device, to: to)
                chat?.networkChanged(device, to: to, now: now, queue: &queue, fleet: &fleet)
                agent?.networkChanged(device, to: to, now: now, queue: &queue, fleet: &fleet)
                desktop?.networkChanged(device, to: to, now: now, queue: &queue, fleet: &fleet)
                fleet.sampler.offer(at: now, device: fleet.fleetIndex(device), kind: "network") { "\(from) -> \(to)" }
            case .execution:
                chat?.follow(device, fleet: &fleet, now: now, queue: &queue)
            case .session(let length, let ours):
                fleet.recorder.add(metrics.sessions[ours ? 0 : 1])
                fleet.recorder.observe(metrics.sessionLength[ours ? 0 : 1], UInt64(max(0, length.nanoseconds)))
            }
        }
    }

    /// What a device's stacks hold that must survive its app: the engine's instances (in
    /// the running engine, else in its store) and the chat client's messages and sends
    /// still to go out.
    func storedFacts(_ device: Int) -> StoredFacts {
        let chatFacts = chat?.storedFacts(device) ?? (messages: 0, pending: 0, signIn: 0)
        let agentFacts = agent?.storedFacts(device) ?? (events: 0, pending: 0)
        return StoredFacts(instances: workflows?.storedInstances(device) ?? 0,
                           messages: agentFacts.events + (bridge?.storedFacts(device) ?? 0) + (desktop?.storedFacts(device) ?? 0),
                           pending: agentFacts.pending, chatMessages: chatFacts.messages, chatPending: chatFacts.pending, chatSignIn: chatFacts.signIn)
    }

    /// Which lifecycle changes the model may make, by cause.
    static func isValid(from: AppState, to: AppState, cause: LifecycleCause) -> Bool {
        switch cause {
        case .opened: return from == .background && to == .foreground
        case .relaunched: return from == .killed && to == .foreground
        case .left: return from == .foreground && to == .background
        case .userKill: return from == .foreground && to == .killed
        case .osKill: return from == .background && to == .killed
        case .batteryDied: return from != .poweredOff && to == .poweredOff
        case .booted: return from == .poweredOff && to == .killed
        case .faultKill: return (from == .foreground || from == .background) && to == .killed
        case .pushLaunch: return from == .killed && to == .background
        }
    }

    /// Brings every device's accounting up to `now`, samples the fleet and closes the bucket.
    mutating func closeBucket(startingAt start: Int64, at now: Instant) {
        chat?.closeBucket(fleet: &fleet, start: start, now: now)
        agent?.closeBucket(fleet: &fleet, start: start, now: now)
        bridge?.closeBucket(fleet: &fleet, start: start, now: now)
        desktop?.closeBucket(fleet: &fleet)
        var sample = FleetSample()
        for index in fleet.devices.indices {
            fleet.devices[index].closeBucket(at: now, env: fleet.environment, tally: &fleet.tally, sample: &sample, index: index)
            if fleet.classes[Int(fleet.classOfDevice[index])].tickDrain > 0 { sample.engineTicks += fleet.devices[index].ticks.total }
        }
        // The engine's ticks are in the devices' drain; their energy is the workflow stack's.
        if let handles = fleet.energy.handles(.workflows) {
            fleet.recorder.add(handles.joules[.cpu], Double(sample.engineTicks - engineTicksRecorded) * fleet.energy.settings.cpu.tick / 1_000)
        }
        engineTicksRecorded = sample.engineTicks
        for state in PowerState.allCases {
            let s = Int(state.rawValue)
            fleet.recorder.add(metrics.ticksExecuted[s], Double(fleet.tally.ticksExecuted[s]))
            fleet.recorder.add(metrics.ticksFastForwarded[s], Double(fleet.tally.ticksFastForwarded[s]))
            fleet.recorder.add(metrics.deviceSeconds[s], Double(fleet.tally.deviceTime[s]) / 1e9)
            fleet.recorder.add(metrics.activeSeconds[s], Double(fleet.tally.activeTime[s]) / 1e9)
            fleet.recorder.set(metrics.devicesByPower[s], Double(sample.byPower[s]))
        }
        fleet.tally.reset()
        for (i, count) in sample.byApp.enumerated() { fleet.recorder.set(metrics.devicesByApp[i], Double(count)) }
        for (i, count) in sample.byNetwork.enumerated() { fleet.recorder.set(metrics.devicesByNetwork[i], Double(count)) }
        for (percent, count) in sample.levels.enumerated() where count > 0 {
            fleet.recorder.observe(metrics.batteryLevel, UInt64(percent), count: count)
        }
        fleet.recorder.set(metrics.batteryMean, fleet.devices.isEmpty ? 0 : sample.levelSum / Double(fleet.devices.count) / 1_000_000)
        fleet.invariants.record(invariantIDs.batteryInRange, checks: fleet.devices.count, violations: sample.levelOutOfRange,
                                first: sample.firstLevelViolation)
        fleet.invariants.record(invariantIDs.powerStateMatchesBattery, checks: fleet.devices.count, violations: sample.powerMismatch,
                                first: sample.firstPowerViolation)
        fleet.recorder.add(metrics.events, Double(eventsInBucket))
        eventsInBucket = 0
        for (kind, handle) in faultGauges { fleet.recorder.set(handle, faultKindsInBucket.contains(kind) ? 1 : 0) }
        faultKindsInBucket = Set(faultsInForce.map { scenario.faults[$0].kind })
        workflows?.closeBucket(fleet: &fleet)
        if let workflows { sync?.closeBucket(fleet: &fleet, workflows: workflows, start: start, now: now) }
        fleet.recorder.closeBucket(startingAt: start)
        sink?(fleet.recorder.takeBatch())
    }

    /// Ends the run at `now`: the last (possibly partial) bucket, per-device figures,
    /// the event sample, invariants and thresholds. Returns the threshold results.
    public mutating func finish(at now: Instant) -> [ThresholdResultRow] {
        let width = scenario.bucket.nanoseconds
        let lastStart = (max(0, now.nanoseconds - 1) / width) * width
        closeBucket(startingAt: lastStart, at: now)
        for device in fleet.devices {
            for state in PowerState.allCases {
                let time = device.time(in: state)
                // Rates over less than ten minutes in a state say more about rounding than the device.
                guard time >= 600_000_000_000 else { continue }
                let perHour = Double(device.ticks.total(state)) * 3_600e9 / Double(time)
                fleet.recorder.observeRun(metrics.ticksPerHour[Int(state.rawValue)], UInt64(perHour.rounded()))
            }
        }
        fleet.recordDeviceEnergy(days: Double(now.nanoseconds) / 86_400e9)
        workflows?.finish(fleet: &fleet)
        if let workflows { sync?.finish(fleet: &fleet, workflows: workflows) }
        chat?.finish(at: now, fleet: &fleet)
        agent?.finish(at: now, fleet: &fleet)
        bridge?.finish(at: now, fleet: &fleet)
        desktop?.finish(at: now, fleet: &fleet)
        fleet.recorder.closeRun()
        let thresholds = ThresholdEvaluator.evaluate(scenario.thresholds, recorder: fleet.recorder)
        var batch = fleet.recorder.takeBatch()
        batch.events = fleet.sampler.rows
        batch.invariants = fleet.invariants.rows
        batch.thresholds = thresholds
        sink?(batch)
        return thresholds
    }
}

/// What a device's stacks hold across an app's death (`device.state_survives_relaunch`).
struct StoredFacts: Equatable, CustomStringConvertible {
    var instances: Int
    /// The other stacks' stored messages and events (agent chats, both bridges).
    var messages: Int
    var pending: Int
    var chatMessages = 0
    var chatPending = 0
    /// The chat client's sign-in (`ChatStack.incarnation`): a new one starts from an empty
    /// store, as the logout or removal that ended the last one took what it held.
    var chatSignIn: UInt64 = 0

    /// Nothing stored before is missing (a relaunch may add: starts that queued, sends),
    /// except what a new chat sign-in since replaced.
    func covers(_ before: StoredFacts) -> Bool {
        let chatKept = chatSignIn != before.chatSignIn || (chatMessages >= before.chatMessages && chatPending >= before.chatPending)
        return chatKept && instances >= before.instances && messages >= before.messages && pending >= before.pending
    }

    var description: String { "\(instances) instances, \(chatMessages + messages) chat messages, \(chatPending + pending) sends" }
}

/// What the bucket-end pass over the fleet collects.
struct FleetSample {
    var byPower = [UInt64](repeating: 0, count: PowerState.allCases.count)
    var byApp = [UInt64](repeating: 0, count: AppState.allCases.count)
    var byNetwork = [UInt64](repeating: 0, count: NetworkState.allCases.count)
    /// Devices per whole battery percent, 0...100.
    var levels = [UInt64](repeating: 0, count: 101)
    var levelSum = 0.0
    var levelOutOfRange = 0
    var powerMismatch = 0
    var firstLevelViolation: String?
    var firstPowerViolation: String?
    /// Ticks so far of the devices that run an engine.
    var engineTicks: UInt64 = 0
}

extension VirtualDevice {
    /// Accounts the device up to a bucket boundary and adds it to the fleet sample, in
    /// place (the device is never copied out of the fleet's array).
    mutating func closeBucket(at now: Instant, env: DeviceEnvironment, tally: inout FleetTally, sample: inout FleetSample, index: Int) {
        account(to: now, env: env, tally: &tally)
        let level = batteryLevel(at: now)
        sample.byPower[Int(power.rawValue)] += 1
        sample.byApp[Int(app.rawValue)] += 1
        sample.byNetwork[Int(network.rawValue)] += 1
        sample.levelSum += Double(level)
        sample.levels[Int(min(100, max(0, level / 1_000_000)))] += 1
        if level < 0 || level > PowerProfile.full {
            sample.levelOutOfRange += 1
            if sample.firstLevelViolation == nil { sample.firstLevelViolation = "device \(index) at \(now): battery level \(level) µ% out of range" }
        }
        if !powerStateIsConsistent(at: now) {
            sample.powerMismatch += 1
            if sample.firstPowerViolation == nil {
                sample.firstPowerViolation = "device \(index) at \(now): \(power) with battery \(level) µ%, plugged \(isPlugged)"
            }
        }
    }

    /// True when the reported power state is the one the battery and charger imply, or a
    /// threshold crossing is due at this very instant and has not been processed yet.
    @inline(__always)
    func powerStateIsConsistent(at t: Instant) -> Bool {
        if deadline(.battery) <= t.nanoseconds { return true }
        if app == .poweredOff && !isPlugged { return power == .criticalBattery }
        return power == derivedPowerState(level: batteryLevel(at: t))
    }
}
