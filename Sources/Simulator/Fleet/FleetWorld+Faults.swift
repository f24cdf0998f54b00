import LabKernel

extension FleetWorld {
    /// Applies fault `index` (or ends it). The devices a fault hits are drawn from the
    /// fault's own stream, device by device, so the end of a radio-off window finds exactly
    /// the devices its start hit.
    mutating func applyFault(_ index: Int, ending: Bool, at now: Instant, queue: inout EventQueue<Event>) {
        let fault = scenario.faults[index]
        let phase = ending ? "ends" : "starts"
        faultKindsInBucket.insert(fault.kind)
        if fault.duration != nil {
            if ending { faultsInForce.remove(index) } else { faultsInForce.insert(index) }
        }
        switch fault {
        case .serverCrash:
            setServerDown(!ending, now: now)
            sampler.offer(at: now, device: nil, kind: "fault") { "server-crash \(phase)" }
            return
        case .pushOutage:
            syncSim?.pushOutage = !ending
            sampler.offer(at: now, device: nil, kind: "fault") { "push-outage \(phase)" }
            return
        case .partition where ending:
            // The partition was added with its end; nothing to undo.
            sampler.offer(at: now, device: nil, kind: "fault") { "partition ends" }
            return
        case .massAppKill, .radioOff, .partition:
            break
        }
        var partitioned: Set<EndpointID> = []
        var generator = root.child(.fault).child(UInt64(index)).generator()
        var hit = 0
        for deviceIndex in devices.indices {
            let deviceClass = classes[Int(classOfDevice[deviceIndex])]
            if let population = fault.population, population != deviceClass.name { continue }
            let chosen: Bool
            switch fault {
            case .massAppKill(_, let fraction, _), .radioOff(_, _, let fraction, _), .partition(_, _, let fraction, _):
                chosen = generator.chance(fraction)
            case .serverCrash, .pushOutage:
                chosen = false
            }
            guard chosen else { continue }
            hit += 1
            switch fault {
            case .massAppKill:
                devices[deviceIndex].killApp(at: now, deviceClass: deviceClass, env: environment, tally: &tally, log: &log)
            case .radioOff:
                devices[deviceIndex].setRadioForcedOff(!ending, at: now, deviceClass: deviceClass, env: environment,
                                                       tally: &tally, log: &log)
            case .partition:
                if let endpoint = syncSim?.endpoints[deviceIndex] { partitioned.insert(endpoint) }
                continue
            case .serverCrash, .pushOutage:
                continue
            }
            if !log.isEmpty { drainLog(device: deviceIndex, at: now, queue: &queue) }
            reschedule(deviceIndex, at: now, queue: &queue)
        }
        if case .partition(_, let duration, _, _) = fault, let server = syncSim?.serverEndpoint {
            syncSim!.network.addPartition(.init(groupA: partitioned, groupB: [server], from: now, until: now + duration))
        }
        sampler.offer(at: now, device: nil, kind: "fault") { "\(fault.kind) \(phase): \(hit) devices" }
    }
}
