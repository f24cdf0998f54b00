import LabKernel

extension FleetWorld {
    /// Applies fault `index` (or ends it). The devices a fault hits are drawn from the
    /// fault's own stream, device by device, so the end of a radio-off window finds exactly
    /// the devices its start hit.
    mutating func applyFault(_ index: Int, ending: Bool, at now: Instant, queue: inout EventQueue<Event>) {
        let fault = scenario.faults[index]
        var generator = root.child(.fault).child(UInt64(index)).generator()
        var hit = 0
        for deviceIndex in devices.indices {
            let deviceClass = classes[Int(classOfDevice[deviceIndex])]
            if let population = fault.population, population != deviceClass.name { continue }
            let chosen: Bool
            switch fault {
            case .massAppKill(_, let fraction, _), .radioOff(_, _, let fraction, _):
                chosen = generator.chance(fraction)
            }
            guard chosen else { continue }
            hit += 1
            switch fault {
            case .massAppKill:
                devices[deviceIndex].killApp(at: now, deviceClass: deviceClass, env: environment, tally: &tally, log: &log)
            case .radioOff:
                devices[deviceIndex].setRadioForcedOff(!ending, at: now, deviceClass: deviceClass, env: environment,
                                                       tally: &tally, log: &log)
            }
            if !log.isEmpty { drainLog(device: deviceIndex, at: now, queue: &queue) }
            reschedule(deviceIndex, at: now, queue: &queue)
        }
        let phase = ending ? "ends" : "starts"
        sampler.offer(at: now, device: nil, kind: "fault") { "\(fault.kind) \(phase): \(hit) devices" }
    }
}
