import LabKernel

/// What the stacks' work costs each phone's battery, and which stack spent it
/// (docs/energy.md).
///
/// Radio. Each transfer (a request, a response, a socket frame) keeps the radio active
/// for its bytes at the link's rate, after a promotion when the radio was idle, then in a
/// tail at lower power (`RadioProfile`). The radio is the phone's, not a stack's: a
/// transfer inside another's tail pays no promotion and only extends the tail, so work
/// that bunches up costs less. The stack whose transfer extends the tail pays for the
/// extension. CPU: per operation (`CPUCosts`); the engine's ticks are in the device's
/// drain rate (`DeviceClass.tickDrain`) and counted here at bucket ends.
///
/// Energy becomes battery µ% through the device's capacity; fractions carry over, so many
/// tiny costs add up exactly. Nothing comes off while the phone charges.
struct EnergyLedger {
    enum Part: Int, MetricLabel {
        case radio, cpu
        var label: String { ["radio", "cpu"][rawValue] }
    }

    enum Direction: Int, MetricLabel {
        case up, down
        var label: String { ["up", "down"][rawValue] }
    }

    /// Handles of one stack's energy metrics.
    struct StackMetrics {
        let joules: LabelledHandles<Part>
        let bytes: LabelledHandles<Direction>
        let radioSeconds: MetricHandle

        init(_ stack: StackKind, recorder: inout Recorder) {
            joules = LabelledHandles("energy.joules", label: "part", extra: [("stack", stack.rawValue)], recorder: &recorder)
            bytes = LabelledHandles("network.bytes", label: "direction", extra: [("stack", stack.rawValue)], recorder: &recorder)
            radioSeconds = recorder.register("radio.seconds", labels: [("stack", stack.rawValue)])
        }
    }

    let settings: EnergySettings
    /// When each device's radio drops back to idle.
    private var tailUntil: [Instant]
    /// Battery µ% owed by each device, below one whole µ%.
    private var owed: [Double]
    private var metrics: [StackKind: StackMetrics] = [:]
    /// The joules each device spent on each stack that runs (device by device, a slot per
    /// stack in `StackKind` order): the spread across the fleet that its totals hide.
    private var spent: [Double] = []
    /// Each stack's slot in `spent` (nil: the stack does not run).
    private var slots: [StackKind: Int] = [:]
    private let devices: Int
    /// `energy.device_day` by stack (nil: every stack together), then by device class (nil:
    /// the class does not run it).
    private(set) var deviceDay: [StackKind?: [MetricHandle?]] = [:]

    init(_ settings: EnergySettings, devices: Int) {
        self.settings = settings
        self.devices = devices
        tailUntil = [Instant](repeating: .zero, count: devices)
        owed = [Double](repeating: 0, count: devices)
    }

    /// Registers the metrics of the stacks that run, in `StackKind` order, and each
    /// population's share of them.
    mutating func register(_ stacks: Set<StackKind>, classes: [DeviceClass], recorder: inout Recorder) {
        for (slot, stack) in stacks.sorted().enumerated() {
            metrics[stack] = StackMetrics(stack, recorder: &recorder)
            slots[stack] = slot
        }
        for stack in [nil] + stacks.sorted() {
            deviceDay[stack] = classes.map { deviceClass in
                guard stack.map(deviceClass.stacks.contains) ?? !deviceClass.stacks.isEmpty else { return nil }
                return recorder.register("energy.device_day", labels: [("stack", stack?.rawValue ?? "all"), ("population", deviceClass.name)])
            }
        }
        spent = [Double](repeating: 0, count: devices * slots.count)
    }

    /// Counts `joules` of `stack`'s work against the device.
    mutating func spend(_ device: Int, _ joules: Double, on stack: StackKind) {
        guard let slot = slots[stack] else { return }
        spent[device * slots.count + slot] += joules
    }

    /// What the device spent on `stack`'s work so far (ticks aside: they are in its drain).
    func spent(_ device: Int, on stack: StackKind) -> Double {
        slots[stack].map { spent[device * slots.count + $0] } ?? 0
    }

    /// The energy of moving `bytes` over the device's radio now, and the radio-on time it
    /// added; moves the device's tail.
    mutating func transfer(_ device: Int, bytes: Int, over access: NetworkState, at now: Instant) -> (joules: Double, seconds: Double) {
        let profile: RadioProfile
        switch access {
        case .wifi: profile = settings.wifi
        case .cellular: profile = settings.cellular
        case .offline: return (0, 0)
        }
        let previous = tailUntil[device]
        let idle = now >= previous
        let active = Double(bytes) / profile.bytesPerSecond + (idle ? Double(profile.promotion.nanoseconds) / 1e9 : 0)
        let activeEnd = now + .nanoseconds(Int64(active * 1e9))
        let tailEnd = activeEnd + profile.tail
        // Tail time already paid for inside this transfer is paid again at active power.
        let overlap = max(0, Double((min(activeEnd, previous) - now).nanoseconds) / 1e9)
        let newTail = max(0, Double((tailEnd - max(activeEnd, previous)).nanoseconds) / 1e9)
        tailUntil[device] = max(previous, tailEnd)
        let joules = active * profile.activeWatts + newTail * profile.tailWatts - overlap * profile.tailWatts
        let seconds = max(0, Double((tailUntil[device] - max(now, previous)).nanoseconds) / 1e9)
        return (max(0, joules), seconds)
    }

    /// Adds `joules` to what the device owes its battery; the whole µ% due now.
    mutating func owe(_ device: Int, joules: Double, microPercentPerJoule: Double) -> Int64 {
        owed[device] += joules * microPercentPerJoule
        let whole = owed[device].rounded(.down)
        owed[device] -= whole
        return Int64(whole)
    }

    func handles(_ stack: StackKind) -> StackMetrics? { metrics[stack] }
}

extension Fleet {
    /// A stack moved `bytes` over a device's radio: the energy, the bytes and the radio
    /// time go to the stack, the energy to the battery.
    mutating func transfer(_ device: Int, bytes: Int, _ direction: EnergyLedger.Direction, stack: StackKind, at now: Instant,
                           queue: inout EventQueue<FleetWorld.Event>) {
        let access = devices[device].network
        guard access != .offline, bytes > 0 else { return }
        let (joules, seconds) = energy.transfer(device, bytes: bytes, over: access, at: now)
        if let handles = energy.handles(stack) {
            recorder.add(handles.bytes[direction], Double(bytes))
            recorder.add(handles.radioSeconds, seconds)
            recorder.add(handles.joules[.radio], joules)
        }
        energy.spend(device, joules, on: stack)
        drain(device, joules: joules, at: now, queue: &queue)
    }

    /// A stack used the device's CPU: `millijoules` to the stack and the battery.
    mutating func compute(_ device: Int, millijoules: Double, stack: StackKind, at now: Instant, queue: inout EventQueue<FleetWorld.Event>) {
        guard millijoules > 0 else { return }
        if let handles = energy.handles(stack) { recorder.add(handles.joules[.cpu], millijoules / 1_000) }
        energy.spend(device, millijoules / 1_000, on: stack)
        drain(device, joules: millijoules / 1_000, at: now, queue: &queue)
    }

    private mutating func drain(_ device: Int, joules: Double, at now: Instant, queue: inout EventQueue<FleetWorld.Event>) {
        let amount = energy.owe(device, joules: joules, microPercentPerJoule: deviceClass(of: device).microPercentPerJoule)
        if devices[device].spend(amount, at: now) { reschedule(device, work: nil, at: now, queue: &queue) }
    }
}

extension Fleet {
    /// At the end of a run of `days`: what each device's work on each of its stacks, and on
    /// all of them, took of its battery a day (`energy.device_day` by population, in
    /// hundredths of a percent). The totals say what a stack costs the average phone; this
    /// says what it costs the phones it costs most (a power user on a flaky network, a
    /// phone that lives on LTE). Ticks count for the workflow stack, as in the totals.
    mutating func recordDeviceEnergy(days: Double) {
        guard days > 0 else { return }
        for device in devices.indices {
            let classIndex = Int(classOfDevice[device]), deviceClass = classes[classIndex]
            guard let allStacks = energy.deviceDay[nil]?[classIndex] else { continue }
            let centipercentPerJoule = deviceClass.microPercentPerJoule / 10_000 / days
            var total = 0.0
            for stack in deviceClass.stacks.sorted() {
                guard let handle = energy.deviceDay[stack]?[classIndex] else { continue }
                var joules = energy.spent(device, on: stack)
                if stack == .workflows && deviceClass.tickDrain > 0 {
                    joules += Double(devices[device].ticks.total) * energy.settings.cpu.tick / 1_000
                }
                total += joules
                recorder.observeRun(handle, UInt64((joules * centipercentPerJoule).rounded()))
            }
            recorder.observeRun(allStacks, UInt64((total * centipercentPerJoule).rounded()))
        }
    }
}
