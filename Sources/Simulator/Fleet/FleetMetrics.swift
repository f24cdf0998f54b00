import LabKernel

/// Handles of every metric the fleet world records, registered once in a fixed order so
/// metric ids are the same in every run.
struct FleetMetrics {
    let events: MetricHandle
    /// Ticks by power state: run one by one, and accounted in bulk by fast-forwarding.
    let ticksExecuted: [MetricHandle]
    let ticksFastForwarded: [MetricHandle]
    let deviceSeconds: [MetricHandle]
    let activeSeconds: [MetricHandle]
    let transitions: [MetricHandle]
    let powerTransitions: [MetricHandle]
    /// [0 = overnight, 1 = top-up]
    let plugs: [MetricHandle]
    let networkChanges: [MetricHandle]
    /// [0 = ours, 1 = other]
    let sessions: [MetricHandle]
    let devicesByPower: [MetricHandle]
    let devicesByApp: [MetricHandle]
    let devicesByNetwork: [MetricHandle]
    let batteryMean: MetricHandle
    let batteryLevel: MetricHandle
    let sessionLength: [MetricHandle]
    let ticksPerHour: [MetricHandle]

    init(recorder: inout Recorder) {
        let states = PowerState.allCases
        events = recorder.register("sim.events")
        // Registered per state, executed then fast-forwarded, as the metric ids have always been.
        var executed: [MetricHandle] = [], fastForwarded: [MetricHandle] = []
        for state in states {
            executed.append(recorder.register("ticks", labels: [("power_state", state.description), ("mode", "executed")]))
            fastForwarded.append(recorder.register("ticks", labels: [("power_state", state.description), ("mode", "fast_forwarded")]))
        }
        ticksExecuted = executed
        ticksFastForwarded = fastForwarded
        deviceSeconds = states.map { recorder.register("device.seconds", labels: [("power_state", $0.description)]) }
        activeSeconds = states.map { recorder.register("device.active_seconds", labels: [("power_state", $0.description)]) }
        transitions = LifecycleCause.allCases.map { recorder.register("lifecycle.transitions", labels: [("cause", $0.description)]) }
        powerTransitions = states.map { recorder.register("power.transitions", labels: [("to", $0.description)]) }
        plugs = ["overnight", "top_up"].map { recorder.register("charger.plugs", labels: [("kind", $0)]) }
        networkChanges = NetworkState.allCases.map { recorder.register("network.changes", labels: [("to", $0.description)]) }
        sessions = ["ours", "other"].map { recorder.register("sessions", labels: [("app", $0)]) }
        devicesByPower = states.map { recorder.register("devices.power_state", labels: [("power_state", $0.description)]) }
        devicesByApp = AppState.allCases.map { recorder.register("devices.app_state", labels: [("state", $0.description)]) }
        devicesByNetwork = NetworkState.allCases.map { recorder.register("devices.network", labels: [("network", $0.description)]) }
        batteryMean = recorder.register("battery.mean")
        batteryLevel = recorder.register("battery.level")
        sessionLength = ["ours", "other"].map { recorder.register("session.length", labels: [("app", $0)]) }
        ticksPerHour = states.map { recorder.register("ticks.per_device_hour", labels: [("power_state", $0.description)]) }
    }
}

/// The invariants the device layer checks in every run.
struct FleetInvariants {
    let batteryInRange: Int
    let powerStateMatchesBattery: Int
    let lifecycleTransitionValid: Int

    init(ledger: inout InvariantLedger) {
        batteryInRange = ledger.register("battery.level_in_range")
        powerStateMatchesBattery = ledger.register("power_state.matches_battery")
        lifecycleTransitionValid = ledger.register("lifecycle.valid_transition")
    }
}
