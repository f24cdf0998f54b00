import DeviceWorkflows
import Orch8Wire
import LabKernel
import MobileSyncServer

/// The server side of sync in the fleet: the worker pool in front of the core, the
/// operator on the dashboard, pushes, campaigns and crashes.
extension SyncStack {
    /// A request reached the server: served at once, queued, or refused. A crashed server
    /// answers nothing: the device times out.
    mutating func serverReceived(_ token: UInt32, fleet: inout Fleet, now: Instant, queue: inout EventQueue<FleetWorld.Event>) {
        guard exchanges[token] != nil, exchanges[token]!.arrivedAt == nil else { return }
        switch pool.admit(token, now: now) {
        case .down:
            return
        case .serving(let service):
            exchanges[token]!.arrivedAt = now
            fleet.recorder.observe(metrics.serverWait, 0)
            queue.schedule(.sync(.serviceDone(token: token, epoch: pool.epoch)), at: now + service)
        case .queued:
            exchanges[token]!.arrivedAt = now
        case .refused:
            exchanges[token]!.arrivedAt = now
            exchanges[token]!.outcome = .failure(SyncServerRefusal(status: 503, message: "unavailable: the server is overloaded"))
            respond(token, fleet: &fleet, now: now, queue: &queue)
        }
    }

    /// A worker finished: the core handles the request now, and the next waiting one starts.
    mutating func serviceDone(_ token: UInt32, epoch: UInt32, fleet: inout Fleet, now: Instant, queue: inout EventQueue<FleetWorld.Event>) {
        guard pool.complete(epoch: epoch, now: now) else { return }
        if let exchange = exchanges[token] {
            do {
                let outcome = try server.sync(exchange.request, tenant: settings.tenant, now: now)
                exchanges[token]!.outcome = .success(outcome.response)
                fleet.recorder.add(metrics.approvals, Double(outcome.newApprovals.count))
                for approval in outcome.newApprovals { scheduleOperator(approval, now: now, queue: &queue) }
            } catch {
                exchanges[token]!.outcome = .failure(error)
            }
            respond(token, fleet: &fleet, now: now, queue: &queue)
        }
        let exchanges = self.exchanges
        while let next = pool.startNext(now: now, isWanted: { exchanges[$0] != nil }) {
            fleet.recorder.observe(metrics.serverWait, UInt64(max(0, next.waited.nanoseconds)))
            queue.schedule(.sync(.serviceDone(token: next.token, epoch: pool.epoch)), at: now + next.service)
        }
    }

    /// Sends the answer back over the network.
    mutating func respond(_ token: UInt32, fleet: inout Fleet, now: Instant, queue: inout EventQueue<FleetWorld.Event>) {
        guard let exchange = exchanges[token] else { return }
        let tickets = network.send(.response(token), from: serverEndpoint, to: endpoints[Int(exchange.device)], at: now, ordered: true)
        for ticket in tickets.prefix(1) { queue.schedule(.sync(.net(slot: ticket.slot)), at: ticket.deliverAt) }
        for ticket in tickets.dropFirst() { _ = network.deliver(slot: ticket.slot, at: now) }
        if tickets.isEmpty { exchanges[token]?.unreachable = true }
    }

    // MARK: The operator

    /// The operator sees the approval and decides after a think time.
    mutating func scheduleOperator(_ approval: ApprovalRecord, now: Instant, queue: inout EventQueue<FleetWorld.Event>) {
        let model = settings.operatorAnswers[approval.blockID] ?? AnswerModel(choices: [], thinkTime: settings.operatorThinkTime, neverAnswer: .zero)
        if operatorGenerator.chance(model.neverAnswer) { return }
        var value = approval.allowedValues.first ?? "yes"
        if !model.choices.isEmpty { value = Self.choose(model.choices, using: &operatorGenerator) }
        let think = model.thinkTime.sampleSpan(using: &operatorGenerator)
        nextOperatorTask &+= 1
        operatorTasks[nextOperatorTask] = (approval.id, value)
        queue.schedule(.sync(.operatorResolve(task: nextOperatorTask)), at: now + think)
    }

    /// One of `choices` by their shares, drawn from `generator`.
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

    mutating func operatorResolves(_ task: UInt32, fleet: inout Fleet, now: Instant, queue: inout EventQueue<FleetWorld.Event>) {
        guard let (approval, value) = operatorTasks.removeValue(forKey: task) else { return }
        // A crashed server's dashboard answers nothing; the operator tries again a minute later.
        if pool.isDown {
            operatorTasks[task] = (approval, value)
            queue.schedule(.sync(.operatorResolve(task: task)), at: now + .minutes(1))
            return
        }
        guard let (command, push) = try? server.resolve(approval: approval, value: value, now: now) else { return }
        fleet.recorder.add(metrics.resolved)
        if let record = server.state.approval(approval) { commandGate[command.id] = "\(record.instanceID):\(record.blockID)" }
        announce(command, push: push, fleet: &fleet, now: now, queue: &queue)
    }

    /// Records a new command and sends its push, if any.
    mutating func announce(_ command: CommandRecord, push: PushWake?, fleet: inout Fleet, now: Instant, queue: inout EventQueue<FleetWorld.Event>) {
        commandCreated[command.id] = (now, push != nil)
        guard push != nil, let device = deviceOfID[command.deviceID] else { return }
        fleet.sendPush(to: device, stack: .sync, at: now, queue: &queue)
    }

    // MARK: Campaigns and server faults

    /// An operator's rollout: `start_workflow` to a share of the devices.
    mutating func runCampaign(_ index: Int, fleet: inout Fleet, workflows: WorkflowStack, now: Instant, queue: inout EventQueue<FleetWorld.Event>) {
        let campaign = settings.campaigns[index]
        for device in workflows.engines.indices where workflows.engines[device] != nil {
            if let population = campaign.population, fleet.deviceClass(of: device).name != population { continue }
            // Whether the rollout picks this phone is the phone's own draw.
            var pick = fleet.deviceSeed(device).child("campaign").child(UInt64(index)).generator()
            guard pick.chance(campaign.fraction) else { continue }
            var payload: [String: JSONValue] = ["sequence_name": .string(campaign.sequence), "input": campaign.input]
            if let key = campaign.dedupKey { payload["dedup_key"] = .string(key) }
            for _ in 0..<campaign.repeats {
                let (command, push) = server.command(.startWorkflow, payload: .object(payload), device: deviceIDs[device], now: now)
                announce(command, push: push, fleet: &fleet, now: now, queue: &queue)
            }
        }
    }

    /// The server crashes (or comes back): queued and in-service requests are lost.
    mutating func setServerDown(_ down: Bool, now: Instant) {
        pool.setDown(down, now: now)
    }
}
