import DeviceWorkflows
import Orch8Wire
import LabKernel
import MobileSyncServer

/// The device side of sync in the fleet: when a device's reporter is due on a tick, its
/// outbox goes to the server as a request over the virtual network; the answer (or a
/// timeout) settles it. Pushes make the next tick sync.
extension FleetWorld {
    static func syncDeviceID(_ index: Int) -> String { "device-\(index)" }

    /// The tick count through `now`: ticks accounted so far plus those due up to `now`
    /// that fast-forwarding has not counted yet (the same number in both tick modes).
    func tickCount(_ device: Int, at now: Instant) -> UInt64 {
        let d = devices[device]
        var count = d.ticks.total
        if d.tickLoopRunning && d.nextTick <= now {
            count += UInt64((now - d.nextTick).nanoseconds / d.tickInterval(environment)) + 1
        }
        return count
    }

    /// When the device's reporter is next due, as an instant (for the work deadline).
    func syncDeadline(_ device: Int, now: Instant) -> Instant? {
        guard let reporter = engines[device]?.syncClient, engines[device]?.inFlight == nil else { return nil }
        if let until = reporter.nextDeadline { return max(until, now) }
        if reporter.forced { return now }
        let d = devices[device]
        guard d.tickLoopRunning else { return nil }
        let count = tickCount(device, at: now)
        guard reporter.dueTick > count else { return now }
        // The due tick, counted from the first tick after `now` on the current lattice.
        let interval = d.tickInterval(environment)
        let first = d.nextTick > now ? d.nextTick
            : Instant(nanoseconds: d.nextTick.nanoseconds + ((now - d.nextTick).nanoseconds / interval + 1) * interval)
        return Instant(nanoseconds: first.nanoseconds + Int64(reporter.dueTick - count - 1) * interval)
    }

    /// Starts a sync from `device` if its reporter is due on this tick.
    mutating func syncIfDue(_ device: Int, now: Instant, queue: inout EventQueue<Event>) {
        guard syncSim != nil, let slot = engines[device], slot.isRunning, slot.inFlight == nil,
              let reporter = slot.syncClient, reporter.isDue(tick: tickCount(device, at: now), now: now) else { return }
        startSync(device, now: now, queue: &queue)
    }

    mutating func startSync(_ device: Int, now: Instant, queue: inout EventQueue<Event>) {
        guard var slot = engines[device], let metrics = syncMetrics else { return }
        slot.clock = now
        let outboxCount = (try? slot.store.outboxCount()) ?? 0
        guard let request = (try? slot.sync(.ticked(tickCount(device, at: now))))?.send, let sent = slot.syncClient?.inFlight else { return }
        if let last = slot.lastSyncStart {
            recorder.observe(metrics.interval[Int(devices[device].power.rawValue)], UInt64(max(0, (now - last).nanoseconds)))
        }
        slot.lastSyncStart = now
        let token = syncSim!.token()
        slot.inFlight = token
        syncSim!.exchanges[token] = SyncSimulation.Exchange(
            device: Int32(device), launch: slot.launches, request: request, sent: sent, startedAt: now,
            complete: sent.entries.count == outboxCount, maxSeq: sent.entries.map(\.seq).max() ?? 0)
        let tickets = syncSim!.network.send(.request(token), from: syncSim!.endpoints[device], to: syncSim!.serverEndpoint, at: now,
                                            ordered: true)
        for ticket in tickets.prefix(1) { queue.schedule(.net(slot: ticket.slot), at: ticket.deliverAt) }
        for ticket in tickets.dropFirst() { _ = syncSim!.network.deliver(slot: ticket.slot, at: now) }
        if tickets.isEmpty { recorder.add(metrics.requests[3]) }
        queue.schedule(.syncTimeout(token: token), at: now + syncSim!.settings.requestTimeout)
    }

    /// A message crossed the network.
    mutating func networkDelivered(slot: UInt32, now: Instant, queue: inout EventQueue<Event>) {
        guard let delivered = syncSim?.network.deliver(slot: slot, at: now) else { return }
        switch delivered.message {
        case .request(let token): serverReceived(token, now: now, queue: &queue)
        case .response(let token): deviceReceived(token, now: now, queue: &queue)
        }
    }

    /// The answer reached the device.
    mutating func deviceReceived(_ token: UInt32, now: Instant, queue: inout EventQueue<Event>) {
        guard let metrics = syncMetrics, let ids = syncInvariants, let exchange = syncSim?.exchanges[token] else { return }
        syncSim!.exchanges[token] = nil
        guard !exchange.finished, let outcome = exchange.outcome else { return }
        let device = Int(exchange.device)
        guard var slot = engines[device], slot.isRunning, slot.launches == exchange.launch, slot.inFlight == token else { return }
        slot.inFlight = nil
        slot.clock = now
        recorder.observe(metrics.latency, UInt64(max(0, (now - exchange.startedAt).nanoseconds)))
        switch outcome {
        case .failure(let refusal):
            recorder.add(metrics.requests[1])
            _ = try? slot.sync(.answered(.refused(status: refusal.status, retryAfter: refusal.status == 503 ? .seconds(5) : nil),
                                         tick: tickCount(device, at: now)))
        case .success(let response):
            recorder.add(metrics.requests[0])
            guard let report = (try? slot.sync(.answered(.accepted(response), tick: tickCount(device, at: now))))?.report else { break }
            if exchange.complete {
                let left = ((try? slot.store.outbox(.status, limit: .max)) ?? []) + ((try? slot.store.outbox(.approval, limit: .max)) ?? [])
                    + ((try? slot.store.outbox(.delegation, limit: .max)) ?? [])
                invariants.check(ids.outboxDrained, !left.contains { $0.seq <= exchange.maxSeq },
                                 "device \(device) at \(now): entries carried by a successful sync are still queued")
            }
            account(report, device: device, now: now)
            let effects = slot.emitted
            slot.emitted.removeAll()
            process(effects, device: device, now: now, queue: &queue)
        }
        reschedule(device, at: now, queue: &queue)
    }

    /// Metrics and invariants of the commands a device just received.
    mutating func account(_ report: CommandReport, device: Int, now: Instant) {
        guard let metrics = syncMetrics, let ids = syncInvariants, let workflows = workflowMetrics else { return }
        recorder.add(metrics.commands[1], Double(report.duplicates.count))
        recorder.add(metrics.commands[2], Double(report.refused.count))
        recorder.add(metrics.commands[3], Double(report.deferred.count))
        for id in report.applied {
            recorder.add(metrics.commands[0])
            let first = syncSim!.appliedCommands.insert(id).inserted
            invariants.check(ids.appliedOnce, first, "command \(id) applied twice on device \(device)")
            if let created = syncSim!.commandCreated.removeValue(forKey: id) {
                recorder.observe(metrics.commandLatency[created.pushed ? 0 : 1], UInt64(max(0, (now - created.at).nanoseconds)))
            }
            if let gate = syncSim!.commandGate.removeValue(forKey: id), let prompted = engines[device]!.prompts.removeValue(forKey: gate) {
                recorder.observe(metrics.roundTrip, UInt64(max(0, (now - prompted).nanoseconds)))
            }
        }
        for (_, instanceID) in report.started {
            guard let facts = engines[device]!.instanceFacts(instanceID), facts.topLevel, let slot = workflows.slot(facts.sequence) else { continue }
            recorder.add(workflows.started[slot])
            activeTopLevel[device] += 1
            let key = engines[device]!.peek { $0.instance(instanceID)?.dedupKey } ?? nil
            if let key {
                let holders = engines[device]!.peek { $0.allInstances.filter { $0.dedupKey == key && !$0.state.isTerminal }.count } ?? 0
                invariants.check(ids.dedupUnique, holders <= 1, "device \(device): \(holders) active instances hold dedup key \(key)")
            }
        }
    }

    /// No answer in time: the device backs off and will send its outbox again.
    mutating func syncTimedOut(_ token: UInt32, now: Instant, queue: inout EventQueue<Event>) {
        guard let metrics = syncMetrics, var exchange = syncSim?.exchanges[token], !exchange.finished else { return }
        exchange.finished = true
        // An answer already on its way is dropped on arrival; none coming is forgotten now.
        syncSim!.exchanges[token] = exchange.outcome == nil ? nil : exchange
        let device = Int(exchange.device)
        guard var slot = engines[device], slot.isRunning, slot.launches == exchange.launch, slot.inFlight == token else { return }
        slot.inFlight = nil
        slot.clock = now
        recorder.add(metrics.requests[2])
        _ = try? slot.sync(.answered(.unreachable, tick: tickCount(device, at: now)))
        reschedule(device, at: now, queue: &queue)
    }

    /// A silent push reached the phone: a running app syncs on its next tick.
    mutating func pushArrived(_ device: Int, now: Instant, queue: inout EventQueue<Event>) {
        guard let metrics = syncMetrics else { return }
        guard var slot = engines[device], slot.isRunning, slot.syncClient != nil else {
            recorder.add(metrics.pushes[4])
            return
        }
        recorder.add(metrics.pushes[0])
        _ = try? slot.sync(.pushReceived)
        reschedule(device, at: now, queue: &queue)
    }

    /// The device's network changed: its endpoint follows (offline drops its traffic).
    mutating func deviceNetworkChanged(_ device: Int, to state: NetworkState) {
        guard syncSim != nil else { return }
        let endpoint = syncSim!.endpoints[device]
        switch state {
        case .offline: syncSim!.network.setOffline(true, for: endpoint)
        case .wifi:
            syncSim!.network.setOffline(false, for: endpoint)
            syncSim!.network.setAccess(.wifi, for: endpoint)
        case .cellular:
            syncSim!.network.setOffline(false, for: endpoint)
            syncSim!.network.setAccess(.cellular, for: endpoint)
        }
    }
}

extension FleetWorld {
    /// The server, its network and the devices' registrations, at the start of a run.
    mutating func setUpSync(_ settings: SyncSettings) {
        let seed = root.child(.server)
        var server = SyncServer(config: SyncServerConfig(), seed: seed.child("core"), wallClock: engineClock)
        server.bootstrap(now: .zero)
        var profiles: [AccessKind: LinkProfile] = [:]
        profiles[.wifi] = scenario.links.wifi
        profiles[.cellular] = scenario.links.cellular
        profiles[.datacenter] = scenario.links.datacenter
        var network = VirtualNetwork<SyncSimulation.Message>(profiles: profiles, seed: root.child(.network).child("sync"))
        var endpoints: [EndpointID] = []
        var tokens = seed.child("push-tokens").generator()
        for index in devices.indices {
            let endpoint = network.addEndpoint(access: devices[index].network == .wifi ? .wifi : .cellular)
            if devices[index].network == .offline { network.setOffline(true, for: endpoint) }
            endpoints.append(endpoint)
            guard let slot = engines[index] else { continue }
            slot.pushToken = tokens.chance(settings.pushShare)
            server.register(device: Self.syncDeviceID(index), platform: "ios", pushToken: slot.pushToken ? "push-\(index)" : nil,
                            tenant: settings.tenant, now: .zero)
        }
        let serverEndpoint = network.addEndpoint(access: .datacenter)
        syncSim = SyncSimulation(server: server, settings: settings, network: network, serverEndpoint: serverEndpoint, endpoints: endpoints,
                                 generator: seed.child("service").generator(), operatorGenerator: seed.child("operator").generator(),
                                 pushGenerator: seed.child("push").generator())
    }

    /// When the device next has work: its engine's deadline or its next sync, never before now.
    func workDeadline(_ device: Int, now: Instant) -> Instant {
        var deadline = engines[device]?.nextDeadline ?? .distantFuture
        if let sync = syncDeadline(device, now: now) { deadline = min(deadline, sync) }
        return max(deadline, now)
    }
}

extension FleetWorld {
    /// No approval lost: every gate waiting on a device whose outbox has drained is known
    /// to the server (pending, resolved or expired).
    mutating func checkApprovalsReachedServer() {
        guard let ids = syncInvariants, let sim = syncSim, let catalog = workflowCatalog else { return }
        for device in engines.indices {
            guard let slot = engines[device], slot.isRunning, (try? slot.store.outboxCount()) == 0 else { continue }
            for (instanceID, step) in slot.waitingSteps() {
                guard let sequence = slot.instanceFacts(instanceID)?.sequence, !catalog.answeredOnDevice(sequence: sequence, step: step) else { continue }
                let known = sim.server.state.approval(device: Self.syncDeviceID(device), instance: instanceID, block: step) != nil
                invariants.check(ids.noLostApprovals, known, "device \(device): \(instanceID) waits at \(step) but the server has no approval for it")
            }
        }
    }
}
