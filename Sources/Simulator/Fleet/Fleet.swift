public import LabKernel
public import LabStore

/// What every stack of a fleet run shares: the phones (the device model) and the lab's
/// instruments (recorder, invariants, event sample). A stack reaches it as `inout Fleet`
/// beside its own state; nothing in here belongs to one stack.
public struct Fleet {
    public internal(set) var devices: [VirtualDevice] = []
    /// Each device's class, beside the devices so a wake-up reads it without touching them.
    var classOfDevice: [UInt16] = []
    /// Each device's place in its population (its stream is `population/member`).
    var memberOfDevice: [Int] = []
    /// Where each population starts in the whole fleet's numbering (with a shard, the
    /// single-process run's index of its first member).
    var fleetFirstOfClass: [Int] = []
    public let classes: [DeviceClass]
    public let environment: DeviceEnvironment
    public let scenario: Scenario
    let root: StreamSeed
    let end: Instant
    /// What the simulated phones' and servers' wall clocks read at `Instant.zero`.
    let engineClock: WallClockOrigin
    public internal(set) var recorder = Recorder()
    public internal(set) var invariants = InvariantLedger()
    public internal(set) var sampler: EventSampler
    var tally = FleetTally()
    var log: [DeviceObservation] = []
    /// What the stacks' radio and CPU use costs each battery.
    var energy: EnergyLedger
    /// The platform push service every stack's server wakes phones through.
    var push: PushService
    /// The access links' latency now (`link-slowdown` faults stretch it).
    var links: LinkConditions

    init(scenario: Scenario) {
        self.scenario = scenario
        root = StreamSeed(scenario.seed)
        end = .zero + scenario.duration
        environment = DeviceEnvironment(clock: DayClock(startOffset: scenario.startAt), tickInterval: scenario.ticks.interval,
                                        mode: scenario.ticks.mode, reportsExecution: scenario.runs(.chat))
        engineClock = WallClockOrigin(unixMilliseconds: WallClockOrigin.simulationEpoch.unixMilliseconds + scenario.startAt.milliseconds)
        var first = 0, fleetFirst = 0
        var classes: [DeviceClass] = []
        var membersOfClass: [[Int]] = []
        for population in scenario.devices {
            // A shard runs every member whose number it owns; members keep their numbers,
            // so their streams (and names on the servers) are the single run's.
            let members = scenario.shard.map { shard in (0..<population.count).filter(shard.includes) } ?? Array(0..<population.count)
            classes.append(DeviceClass(name: population.name, count: members.count, firstDevice: first,
                                       power: population.power, lifecycle: population.lifecycle, network: population.network,
                                       stacks: scenario.stacks(of: population), tickInterval: scenario.ticks.interval, cpu: scenario.energy.cpu))
            membersOfClass.append(members)
            fleetFirstOfClass.append(fleetFirst)
            first += members.count
            fleetFirst += population.count
        }
        self.classes = classes
        sampler = EventSampler(capacity: scenario.eventSample, seed: root.child(.recorder))
        energy = EnergyLedger(scenario.energy, devices: first)
        push = PushService(scenario.push)
        links = LinkConditions(scenario.links)
        devices.reserveCapacity(first)
        let deviceRoot = root.child(.device)
        for (index, deviceClass) in classes.enumerated() {
            let classSeed = deviceRoot.child(deviceClass.name)
            for member in membersOfClass[index] {
                var device = VirtualDevice(deviceClass: deviceClass, classIndex: UInt16(index),
                                           seed: classSeed.child(UInt64(member)), environment: environment)
                _ = device.planFirstWake(env: environment)
                devices.append(device)
                classOfDevice.append(UInt16(index))
                memberOfDevice.append(member)
            }
        }
    }

    func deviceClass(of device: Int) -> DeviceClass { classes[Int(classOfDevice[device])] }

    /// Whether the device's population runs `stack`.
    func runs(_ stack: StackKind, _ device: Int) -> Bool { deviceClass(of: device).stacks.contains(stack) }

    /// The device's own seed (`device/population/member`): every stream about this phone
    /// (its model, its chat client, its links, the pushes it gets, whether a fault or a
    /// campaign picks it) is a labelled child of it, so adding a population, or a device
    /// to one, changes no other device's draws.
    func deviceSeed(_ device: Int) -> StreamSeed {
        root.child(.device).child(deviceClass(of: device).name).child(UInt64(memberOfDevice[device]))
    }

    /// The device's index in the whole fleet (the single-process run's numbering), for
    /// what a run records about one device.
    func fleetIndex(_ device: Int) -> Int { fleetFirstOfClass[Int(classOfDevice[device])] + memberOfDevice[device] }

    /// The device's name on the servers (`everyday-17`): its population and place in it,
    /// not its index in the whole fleet.
    func deviceName(_ device: Int) -> String { "\(deviceClass(of: device).name)-\(memberOfDevice[device])" }

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

    /// Forgets a device's pending wake-up and schedules a fresh one (after an outside
    /// change), with `work` as its work deadline when given.
    mutating func reschedule(_ device: Int, work: Instant?, at now: Instant, queue: inout EventQueue<FleetWorld.Event>) {
        if let work { devices[device].workDeadline = work }
        let (next, generation) = devices[device].forgetScheduledWake(env: environment)
        if next < end { queue.schedule(.wake(device: UInt32(device), generation: generation), at: next) }
    }
}
