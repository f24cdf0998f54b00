import LabKernel

extension FleetWorld {
    /// Applies fault `index` (or ends it). Whether a fault hits a device is the device's
    /// own draw (`fault/<index>` of its seed), so the end of a radio-off window finds
    /// exactly the devices its start hit, and another population changes nothing.
    mutating func applyFault(_ index: Int, ending: Bool, at now: Instant, queue: inout EventQueue<Event>) {
        let fault = scenario.faults[index]
        let phase = ending ? "ends" : "starts"
        faultKindsInBucket.insert(fault.kind)
        if fault.duration != nil {
            if ending { faultsInForce.remove(index) } else { faultsInForce.insert(index) }
        }
        switch fault {
        case .serverCrash(_, _, let server):
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
            switch server {
            case .sync: sync?.pool.slowdown = factor
            case .chat: chat?.serving.pool.slowdown = factor
            case .agent: agent?.serving.pool.slowdown = factor
            case .aiBridge: bridge?.serving.pool.slowdown = factor
            case .workflows, .desktopBridge: break  // no server
            }
            fleet.sampler.offer(at: now, device: nil, kind: "fault") { "server-slowdown (\(server.rawValue), service ×\(Self.factorText(factor))) \(phase)" }
            return
        case .linkSlowdown(_, _, let link, _):
            let factor = slowdownInForce { if case .linkSlowdown(_, _, link, let factor) = $0 { factor } else { nil } }
            fleet.links.setSlowdown(factor, of: link)
            sync?.network.setLatencyFactor(factor, for: link)
            fleet.sampler.offer(at: now, device: nil, kind: "fault") { "link-slowdown (\(link), latency ×\(Self.factorText(factor))) \(phase)" }
            return
        case .pushOutage:
            fleet.push.outage = !ending
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
            let deviceClass = fleet.deviceClass(of: deviceIndex)
            if let population = fault.population, population != deviceClass.name { continue }
            let chosen: Bool
            switch fault {
            case .massAppKill(_, let fraction, _), .radioOff(_, _, let fraction, _), .partition(_, _, let fraction, _):
                var draw = fleet.deviceSeed(deviceIndex).child("fault").child(UInt64(index)).generator()
                chosen = draw.chance(fraction)
            case .serverCrash, .serverSlowdown, .linkSlowdown, .pushOutage:
                chosen = false
            }
            guard chosen else { continue }
            hit += 1
            switch fault {
            case .massAppKill:
                fleet.devices[deviceIndex].killApp(at: now, deviceClass: deviceClass, env: fleet.environment, tally: &fleet.tally,
                                                   log: &fleet.log)
            case .radioOff:
                fleet.devices[deviceIndex].setRadioForcedOff(!ending, at: now, deviceClass: deviceClass, env: fleet.environment,
                                                             tally: &fleet.tally, log: &fleet.log)
            case .partition:
                if let endpoint = sync?.endpoints[deviceIndex] { partitioned.insert(endpoint) }
                continue
            case .serverCrash, .serverSlowdown, .linkSlowdown, .pushOutage:
                continue
            }
            if !fleet.log.isEmpty { drainLog(device: deviceIndex, at: now, queue: &queue) }
            reschedule(deviceIndex, at: now, queue: &queue)
        }
        if case .partition(_, let duration, _, _) = fault { sync?.partition(partitioned, from: now, until: now + duration) }
        fleet.sampler.offer(at: now, device: nil, kind: "fault") { "\(fault.kind) \(phase): \(hit) devices" }
    }

    /// The largest factor among the slowdowns in force that `factor` picks (1: none): of
    /// overlapping slowdowns of one server or link, the slowest holds.
    func slowdownInForce(_ factor: (Fault) -> Double?) -> Double {
        faultsInForce.compactMap { factor(scenario.faults[$0]) }.max() ?? 1
    }

    static func factorText(_ factor: Double) -> String { factor == factor.rounded() ? String(Int(factor)) : String(factor) }
}
