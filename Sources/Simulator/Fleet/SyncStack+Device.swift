import DeviceWorkflows
import Orch8Wire
import LabKernel
import MobileSyncServer

/// The device side of sync in the fleet: when a device's client is due on a tick, its
/// request goes to the server over the virtual network; the answer (or a timeout)
/// settles it. Pushes make the next tick sync.
extension SyncStack {
    /// Starts a sync from `device` if its client is due on this tick.
    mutating func syncIfDue(_ device: Int, fleet: inout Fleet, workflows: inout WorkflowStack, now: Instant,
                            queue: inout EventQueue<FleetWorld.Event>) {
        guard var slot = workflows.engines[device], slot.isRunning, slot.inFlight == nil,
              let client = slot.syncClient, client.isDue(tick: fleet.tickCount(device, at: now), now: now) else { return }
        slot.clock = now
        let outboxCount = (try? slot.store.outboxCount()) ?? 0
        guard let request = (try? slot.sync(.ticked(fleet.tickCount(device, at: now))))?.send, let sent = slot.syncClient?.inFlight else { return }
        if let last = slot.lastSyncStart {
            fleet.recorder.observe(metrics.interval[Int(fleet.devices[device].power.rawValue)], UInt64(max(0, (now - last).nanoseconds)))
        }
        slot.lastSyncStart = now
        fleet.recorder.add(metrics.http.requests)
        let token = token()
        slot.inFlight = token
        exchanges[token] = Exchange(device: Int32(device), launch: slot.launches, request: request, sent: sent, startedAt: now,
                                    complete: sent.entries.count == outboxCount, maxSeq: sent.entries.map(\.seq).max() ?? 0)
        let tickets = network.send(.request(token), from: endpoints[device], to: serverEndpoint, at: now, ordered: true)
        for ticket in tickets.prefix(1) { queue.schedule(.sync(.net(slot: ticket.slot)), at: ticket.deliverAt) }
        for ticket in tickets.dropFirst() { _ = network.deliver(slot: ticket.slot, at: now) }
        if tickets.isEmpty { exchanges[token]?.unreachable = true }
        queue.schedule(.sync(.timeout(token: token)), at: now + settings.requestTimeout)
        let bytes = Self.wireSize(of: request.json)
        fleet.transfer(device, bytes: bytes, .up, stack: .sync, at: now, queue: &queue)
        fleet.compute(device, millijoules: fleet.energy.settings.cpu.kilobyte * Double(bytes) / 1_024, stack: .sync, at: now, queue: &queue)
    }

    /// Bytes of a sync request or response on the wire: its JSON and the HTTP around it.
    static func wireSize(of body: JSONValue) -> Int {
        var bytes: [UInt8] = []
        body.write(to: &bytes, sortedKeys: false)
        return bytes.count + 320
    }

    /// The answer reached the device.
    mutating func deviceReceived(_ token: UInt32, fleet: inout Fleet, workflows: inout WorkflowStack, now: Instant,
                                 queue: inout EventQueue<FleetWorld.Event>) {
        guard let exchange = exchanges.removeValue(forKey: token), !exchange.finished, let outcome = exchange.outcome else { return }
        let device = Int(exchange.device)
        guard var slot = workflows.engines[device], slot.isRunning, slot.launches == exchange.launch, slot.inFlight == token else { return }
        slot.inFlight = nil
        slot.clock = now
        fleet.recorder.observe(metrics.http.latency, UInt64(max(0, (now - exchange.startedAt).nanoseconds)))
        let bytes: Int
        switch outcome {
        case .failure(let refusal): bytes = 200 + refusal.message.utf8.count
        case .success(let response): bytes = Self.wireSize(of: response.json)
        }
        fleet.transfer(device, bytes: bytes, .down, stack: .sync, at: now, queue: &queue)
        fleet.compute(device, millijoules: fleet.energy.settings.cpu.kilobyte * Double(bytes) / 1_024, stack: .sync, at: now, queue: &queue)
        switch outcome {
        case .failure(let refusal):
            fleet.recorder.add(metrics.requests[.refused])
            if refusal.status >= 500 { fleet.recorder.add(metrics.http.failures) }
            _ = try? slot.sync(.answered(.refused(status: refusal.status, retryAfter: refusal.status == 503 ? .seconds(5) : nil),
                                         tick: fleet.tickCount(device, at: now)))
        case .success(let response):
            fleet.recorder.add(metrics.requests[.ok])
            guard let report = (try? slot.sync(.answered(.accepted(response), tick: fleet.tickCount(device, at: now))))?.report else { break }
            if exchange.complete {
                let left = ((try? slot.store.outbox(.status, limit: .max)) ?? []) + ((try? slot.store.outbox(.approval, limit: .max)) ?? [])
                    + ((try? slot.store.outbox(.delegation, limit: .max)) ?? [])
                fleet.invariants.check(ids.outboxDrained, !left.contains { $0.seq <= exchange.maxSeq },
                                       "device \(device) at \(now): entries carried by a successful sync are still queued")
            }
            account(report, device: device, fleet: &fleet, workflows: &workflows, now: now)
            let effects = slot.emitted
            slot.emitted.removeAll()
            workflows.process(effects, device: device, fleet: &fleet, now: now, queue: &queue)
        }
        workflows.reschedule(device, fleet: &fleet, now: now, queue: &queue)
    }

    /// Metrics and invariants of the commands a device just received.
    mutating func account(_ report: CommandReport, device: Int, fleet: inout Fleet, workflows: inout WorkflowStack, now: Instant) {
        fleet.recorder.add(metrics.commands[.duplicate], Double(report.duplicates.count))
        fleet.recorder.add(metrics.commands[.refused], Double(report.refused.count))
        fleet.recorder.add(metrics.commands[.deferred], Double(report.deferred.count))
        let slot = workflows.engines[device]!
        for id in report.applied {
            fleet.recorder.add(metrics.commands[.applied])
            let first = appliedCommands.insert(id).inserted
            fleet.invariants.check(ids.appliedOnce, first, "command \(id) applied twice on device \(device)")
            if let created = commandCreated.removeValue(forKey: id) {
                fleet.recorder.observe(metrics.commandLatency[created.pushed ? .yes : .no], UInt64(max(0, (now - created.at).nanoseconds)))
            }
            if let gate = commandGate.removeValue(forKey: id), let prompted = slot.prompts.removeValue(forKey: gate) {
                fleet.recorder.observe(metrics.roundTrip, UInt64(max(0, (now - prompted).nanoseconds)))
            }
        }
        for (_, instanceID) in report.started {
            guard let facts = slot.instanceFacts(instanceID), facts.topLevel, let sequence = workflows.metrics.slot(facts.sequence) else { continue }
            fleet.recorder.add(workflows.metrics.started[sequence])
            workflows.activeTopLevel[device] += 1
            if let key = slot.peek({ $0.instance(instanceID)?.dedupKey }) ?? nil {
                let holders = slot.peek { $0.allInstances.filter { $0.dedupKey == key && !$0.state.isTerminal }.count } ?? 0
                fleet.invariants.check(ids.dedupUnique, holders <= 1, "device \(device): \(holders) active instances hold dedup key \(key)")
            }
        }
    }

    /// No answer in time: the device backs off and will send its outbox again.
    mutating func timedOut(_ token: UInt32, fleet: inout Fleet, workflows: WorkflowStack, now: Instant, queue: inout EventQueue<FleetWorld.Event>) {
        guard var exchange = exchanges[token], !exchange.finished else { return }
        exchange.finished = true
        // An answer already on its way is dropped on arrival; none coming is forgotten now.
        exchanges[token] = exchange.outcome == nil ? nil : exchange
        let device = Int(exchange.device)
        guard var slot = workflows.engines[device], slot.isRunning, slot.launches == exchange.launch, slot.inFlight == token else { return }
        slot.inFlight = nil
        slot.clock = now
        fleet.recorder.add(metrics.requests[exchange.unreachable ? .unreachable : .timeout])
        fleet.recorder.add(metrics.http.failures)
        _ = try? slot.sync(.answered(.unreachable, tick: fleet.tickCount(device, at: now)))
        workflows.reschedule(device, fleet: &fleet, now: now, queue: &queue)
    }

    /// A silent push woke the phone (or found it running): the client syncs on its next
    /// tick. The caller reschedules the device.
    func pushArrived(_ device: Int, fleet: inout Fleet, workflows: WorkflowStack) {
        guard var slot = workflows.engines[device], slot.isRunning, slot.syncClient != nil else { return }
        _ = try? slot.sync(.pushReceived)
    }
}
