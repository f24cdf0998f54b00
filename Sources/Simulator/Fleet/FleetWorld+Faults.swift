import LabKernel

extension FleetWorld {
    /// Applies fault `index` (or ends it). Whether a fault hits a device is the device's
    /// own draw (`fault/<index>` of its seed), so the end of a radio-off window finds
    /// exactly the devices its start hit, and another population changes nothing.
    ///
    /// Faults may overlap (a scenario's own, or `--chaos`'s draws): a server is down while
    /// any crash of it is in force, pushes are out while any outage is, a device's radio
    /// stays off while any radio-off that hit it is, and of overlapping slowdowns the
    /// slowest holds.
    mutating func applyFault(_ index: Int, ending: Bool, at now: Instant, queue: inout EventQueue<Event>) {
        let fault = scenario.faults[index]
        let phase = ending ? "ends" : "starts"
        faultKindsInBucket.insert(fault.kind)
        if fault.duration != nil {
            if ending { faultsInForce.remove(index) } else { faultsInForce.insert(index) }
        }
        switch fault {
        case .serverCrash(_, _, let server):
            let crashes = faultsInForce.count { if case .serverCrash(_, _, server) = scenario.faults[$0] { true } else { false } }
            // Already down at this start, or still down at this end: another crash holds it.
            guard crashes == (ending ? 0 : 1) else {
                fleet.sampler.offer(at: now, device: nil, kind: "fault") { "server-crash (\(server.rawValue)) \(phase), overlapping another" }
                return
            }
            switch server {
            case .sync: sync?.setServerDown(!ending, now: now)
            case .chat: chat?.setServerDown(!ending, fleet: &fleet, now: now, queue: &queue)
            case .agent: agent?.setServerDown(!ending, fleet: &fleet, now: now, queue: &queue)
            case .aiBridge: bridge?.setRelayDown(!ending, fleet: &fleet, now: now, queue: &queue)
            case .workflows, .desktopBridge: break  // no server (desktops sleep by their day instead)
            }
            fleet.sampler.offer(at: now, device: nil, kind: "fault") { "server-crash (\(server.rawValue)) \(phase)" }
            return
        case .serverSlowdown(_, _, let server, _):
            // Overlapping slowdowns of one server: the slowest in force holds.
            let factor = slowdownInForce { if case .serverSlowdown(_, _, server, let factor) = $0 { factor } else { nil } }
            changePool(of: server) { $0.slowdown = factor }
            fleet.sampler.offer(at: now, device: nil, kind: "fault") { "server-slowdown (\(server.rawValue), service ×\(Self.factorText(factor))) \(phase)" }
            return
        case .serverErrors(_, _, let server, _):
            // Overlapping error windows of one server: the largest share in force holds.
            let share = largestInForce({ if case .serverErrors(_, _, server, let share) = $0 { share } else { nil } },
                                       by: { $0.fraction < $1.fraction }) ?? .zero
            changePool(of: server) { $0.errorShare = share }
            fleet.sampler.offer(at: now, device: nil, kind: "fault") { "server-errors (\(server.rawValue), \(share) of requests refused) \(phase)" }
            return
        case .linkSlowdown(_, _, let link, _):
            let factor = slowdownInForce { if case .linkSlowdown(_, _, link, let factor) = $0 { factor } else { nil } }
            fleet.links.setSlowdown(factor, of: link)
            sync?.network.setLatencyFactor(factor, for: link)
            fleet.sampler.offer(at: now, device: nil, kind: "fault") { "link-slowdown (\(link), latency ×\(Self.factorText(factor))) \(phase)" }
            return
        case .pushOutage:
            fleet.push.outage = faultsInForce.contains { if case .pushOutage = scenario.faults[$0] { true } else { false } }
            fleet.sampler.offer(at: now, device: nil, kind: "fault") { "push-outage \(phase)" }
            return
        case .partition where ending:
            // The partition was added with its end; nothing to undo.
            fleet.sampler.offer(at: now, device: nil, kind: "fault") { "partition ends" }
            return
        case .massAppKill, .radioOff, .partition:
            break
        }
        var partitioned: Set<EndpointID> = []
        var hit = 0
        for deviceIndex in fleet.devices.indices {
            guard hits(index, deviceIndex) else { continue }
            let deviceClass = fleet.deviceClass(of: deviceIndex)
            hit += 1
            switch fault {
            case .massAppKill:
                fleet.devices[deviceIndex].killApp(at: now, deviceClass: deviceClass, env: fleet.environment, tally: &fleet.tally,
                                                   log: &fleet.log)
            case .radioOff:
                let off = !ending || faultsInForce.contains { other in
                    if case .radioOff = scenario.faults[other] { hits(other, deviceIndex) } else { false }
                }
                fleet.devices[deviceIndex].setRadioForcedOff(off, at: now, deviceClass: deviceClass, env: fleet.environment,
                                                             tally: &fleet.tally, log: &fleet.log)
            case .partition:
                if let endpoint = sync?.endpoints[deviceIndex] { partitioned.insert(endpoint) }
                continue
            case .serverCrash, .serverSlowdown, .serverErrors, .linkSlowdown, .pushOutage:
                continue
            }
            if !fleet.log.isEmpty { drainLog(device: deviceIndex, at: now, queue: &queue) }
            reschedule(deviceIndex, at: now, queue: &queue)
        }
        if case .partition(_, let duration, _, _) = fault { sync?.partition(partitioned, from: now, until: now + duration) }
        fleet.sampler.offer(at: now, device: nil, kind: "fault") { "\(fault.kind) \(phase): \(hit) devices" }
    }

    /// Each fault's label among a device's fault draws: the fault as written (and how many
    /// identical ones come before it), not its place in the list. Adding or removing a
    /// fault then changes no other fault's devices, so any subset of a run's faults pasted
    /// into a scenario replays them exactly (what `seeds --shrink` relies on).
    static func faultLabels(_ faults: [Fault]) -> [UInt64] {
        var seen: [String: UInt64] = [:]
        return faults.map { fault in
            let text = fault.yaml
            defer { seen[text, default: 0] += 1 }
            return StreamSeed(StableHash.fnv1a64(text)).child(seen[text] ?? 0).value
        }
    }

    /// Whether fault `index` hits device `device`: of its population (or every one), by the
    /// device's own draw for that fault (`faultLabels`). Faults on servers and links hit no
    /// device.
    func hits(_ index: Int, _ device: Int) -> Bool {
        let fault = scenario.faults[index]
        if let population = fault.population, population != fleet.deviceClass(of: device).name { return false }
        switch fault {
        case .massAppKill(_, let fraction, _), .radioOff(_, _, let fraction, _), .partition(_, _, let fraction, _):
            var draw = fleet.deviceSeed(device).child("fault").child(faultLabels[index]).generator()
            return draw.chance(fraction)
        case .serverCrash, .serverSlowdown, .serverErrors, .linkSlowdown, .pushOutage:
            return false
        }
    }

    /// Changes the worker pool of `server`'s stack (a stack without a server has none).
    mutating func changePool(of server: StackKind, _ change: (inout WorkerPool) -> Void) {
        switch server {
        case .sync: if sync != nil { change(&sync!.pool) }
        case .chat: if chat != nil { change(&chat!.serving.pool) }
        case .agent: if agent != nil { change(&agent!.serving.pool) }
        case .aiBridge: if bridge != nil { change(&bridge!.serving.pool) }
        case .workflows, .desktopBridge: break
        }
    }

    /// The largest factor among the slowdowns in force that `factor` picks (1: none): of
    /// overlapping slowdowns of one server or link, the slowest holds.
    func slowdownInForce(_ factor: (Fault) -> Double?) -> Double {
        largestInForce(factor, by: <) ?? 1
    }

    /// The largest of what `value` picks from the faults in force (nil: none of them).
    func largestInForce<T>(_ value: (Fault) -> T?, by less: (T, T) -> Bool) -> T? {
        faultsInForce.compactMap { value(scenario.faults[$0]) }.max(by: less)
    }

    static func factorText(_ factor: Double) -> String { factor == factor.rounded() ? String(Int(factor)) : String(factor) }
}
