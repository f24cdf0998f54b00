import DeviceWorkflows
import Orch8Wire
import LabKernel
import MobileSyncServer

/// The server side of sync in the fleet (see `SyncSimulation`).
extension FleetWorld {
    /// A request reached the server: served at once, queued, or refused.
    mutating func serverReceived(_ token: UInt32, now: Instant, queue: inout EventQueue<Event>) {
        guard var sim = syncSim, sim.exchanges[token] != nil, sim.exchanges[token]!.arrivedAt == nil else { return }
        defer { syncSim = sim }
        if sim.serverDown {
            // No answer at all: the device times out.
            return
        }
        sim.exchanges[token]!.arrivedAt = now
        if sim.busyWorkers < sim.settings.workers {
            syncSim = sim
            startService(token, now: now, queue: &queue)
            sim = syncSim!
        } else if sim.queueLength < sim.settings.queueLimit {
            sim.enqueue(token)
        } else {
            sim.exchanges[token]!.outcome = .failure(SyncServerRefusal(status: 503, message: "unavailable: the server is overloaded"))
            syncSim = sim
            respond(token, now: now, queue: &queue)
            sim = syncSim!
        }
    }

    mutating func startService(_ token: UInt32, now: Instant, queue: inout EventQueue<Event>) {
        guard let metrics = syncMetrics, let arrived = syncSim!.exchanges[token]?.arrivedAt else { return }
        syncSim!.accountBusy(to: now)
        syncSim!.busyWorkers += 1
        recorder.observe(metrics.serverWait, UInt64(max(0, (now - arrived).nanoseconds)))
        let service = syncSim!.settings.serviceTime.sampleSpan(using: &syncSim!.generator)
        queue.schedule(.serviceDone(token: token, epoch: syncSim!.epoch), at: now + service)
    }

    /// A worker finished: the core handles the request now, and the next waiting one starts.
    mutating func serviceDone(_ token: UInt32, epoch: UInt32, now: Instant, queue: inout EventQueue<Event>) {
        guard let metrics = syncMetrics, syncSim != nil, epoch == syncSim!.epoch else { return }
        syncSim!.accountBusy(to: now)
        syncSim!.busyWorkers -= 1
        if let exchange = syncSim!.exchanges[token] {
            do {
                let outcome = try syncSim!.server.sync(exchange.request, tenant: syncSim!.settings.tenant, now: now)
                syncSim!.exchanges[token]!.outcome = .success(outcome.response)
                recorder.add(metrics.approvals, Double(outcome.newApprovals.count))
                for approval in outcome.newApprovals { scheduleOperator(approval, now: now, queue: &queue) }
            } catch {
                syncSim!.exchanges[token]!.outcome = .failure(error)
            }
            respond(token, now: now, queue: &queue)
        }
        while syncSim!.busyWorkers < syncSim!.settings.workers, let next = syncSim!.dequeue() {
            guard syncSim!.exchanges[next] != nil else { continue }
            startService(next, now: now, queue: &queue)
        }
    }

    /// Sends the answer back over the network.
    mutating func respond(_ token: UInt32, now: Instant, queue: inout EventQueue<Event>) {
        guard let exchange = syncSim!.exchanges[token] else { return }
        let tickets = syncSim!.network.send(.response(token), from: syncSim!.serverEndpoint, to: syncSim!.endpoints[Int(exchange.device)],
                                            at: now, ordered: true)
        for ticket in tickets.prefix(1) { queue.schedule(.net(slot: ticket.slot), at: ticket.deliverAt) }
        for ticket in tickets.dropFirst() { _ = syncSim!.network.deliver(slot: ticket.slot, at: now) }
        if tickets.isEmpty, let metrics = syncMetrics { recorder.add(metrics.requests[3]) }
    }

    // MARK: The operator

    /// The operator sees the approval and decides after a think time.
    mutating func scheduleOperator(_ approval: ApprovalRecord, now: Instant, queue: inout EventQueue<Event>) {
        guard let settings = scenario.sync else { return }
        let model = settings.operatorAnswers[approval.blockID] ?? AnswerModel(choices: [], thinkTime: settings.operatorThinkTime, neverAnswer: .zero)
        if syncSim!.operatorGenerator.chance(model.neverAnswer) { return }
        var value = approval.allowedValues.first ?? "yes"
        if !model.choices.isEmpty {
            value = Self.choose(model.choices, using: &syncSim!.operatorGenerator)
        }
        let think = model.thinkTime.sampleSpan(using: &syncSim!.operatorGenerator)
        syncSim!.nextOperatorTask &+= 1
        let task = syncSim!.nextOperatorTask
        syncSim!.operatorTasks[task] = (approval.id, value)
        queue.schedule(.operatorResolve(task: task), at: now + think)
    }

    static func choose(_ choices: [(value: String, ratio: Ratio)], using generator: inout SeededGenerator) -> String {
        var draw = generator.next(below: UInt64(Ratio.partsPerBillion))
        var value = choices.first?.value ?? "yes"
        for choice in choices {
            let share = UInt64(choice.ratio.numerator) * UInt64(Ratio.partsPerBillion) / UInt64(choice.ratio.denominator)
            value = choice.value
            if draw < share { break }
            draw -= share
        }
        return value
    }

    mutating func operatorResolves(_ task: UInt32, now: Instant, queue: inout EventQueue<Event>) {
        guard let metrics = syncMetrics, let (approval, value) = syncSim?.operatorTasks.removeValue(forKey: task) else { return }
        // A crashed server's dashboard answers nothing; the operator tries again a minute later.
        if syncSim!.serverDown {
            syncSim!.operatorTasks[task] = (approval, value)
            queue.schedule(.operatorResolve(task: task), at: now + .minutes(1))
            return
        }
        guard let (command, push) = try? syncSim!.server.resolve(approval: approval, value: value, now: now) else { return }
        recorder.add(metrics.resolved)
        if let record = syncSim!.server.state.approvals[approval] {
            syncSim!.commandGate[command.id] = "\(record.instanceID):\(record.blockID)"
        }
        announce(command, push: push, now: now, queue: &queue)
    }

    /// Records a new command and sends its push, if any.
    mutating func announce(_ command: CommandRecord, push: PushWake?, now: Instant, queue: inout EventQueue<Event>) {
        guard let metrics = syncMetrics, let settings = scenario.sync else { return }
        syncSim!.commandCreated[command.id] = (now, push != nil)
        guard push != nil, let device = Int(command.deviceID.dropFirst("device-".count)) else { return }
        if syncSim!.pushOutage {
            recorder.add(metrics.pushes[2])
            return
        }
        if syncSim!.pushGenerator.chance(settings.pushLoss) {
            recorder.add(metrics.pushes[1])
            return
        }
        let copies = syncSim!.pushGenerator.chance(settings.pushDuplication) ? 2 : 1
        if copies == 2 { recorder.add(metrics.pushes[3]) }
        for _ in 0..<copies {
            let delay = settings.pushDelay.sampleSpan(using: &syncSim!.pushGenerator)
            queue.schedule(.push(device: UInt32(device)), at: now + delay)
        }
    }

    // MARK: Campaigns and server faults

    /// An operator's rollout: `start_workflow` to a share of the devices.
    mutating func runCampaign(_ index: Int, now: Instant, queue: inout EventQueue<Event>) {
        guard let settings = scenario.sync else { return }
        let campaign = settings.campaigns[index]
        var generator = root.child(.server).child("campaign").child(UInt64(index)).generator()
        for device in engines.indices where engines[device] != nil {
            if let population = campaign.population, classes[Int(classOfDevice[device])].name != population { continue }
            guard generator.chance(campaign.fraction) else { continue }
            var payload: [String: JSONValue] = ["sequence_name": .string(campaign.sequence), "input": campaign.input]
            if let key = campaign.dedupKey { payload["dedup_key"] = .string(key) }
            for _ in 0..<campaign.repeats {
                let (command, push) = syncSim!.server.command(.startWorkflow, payload: .object(payload), device: Self.syncDeviceID(device), now: now)
                announce(command, push: push, now: now, queue: &queue)
            }
        }
    }

    /// The server crashes (or comes back): queued and in-service requests are lost.
    mutating func setServerDown(_ down: Bool, now: Instant) {
        guard syncSim != nil else { return }
        syncSim!.accountBusy(to: now)
        syncSim!.serverDown = down
        if down {
            syncSim!.epoch &+= 1
            syncSim!.busyWorkers = 0
            syncSim!.waiting.removeAll()
            syncSim!.waitingHead = 0
        }
    }
}
