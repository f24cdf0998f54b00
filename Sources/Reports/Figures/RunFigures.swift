public import LabStore
import LabKernel

/// One endpoint's latency over a run: what the dashboard, the run summary and a sweep
/// report per endpoint.
public struct EndpointFigure: Sendable, Equatable {
    public var stack: String
    public var endpoint: String
    public var requests: UInt64
    public var failures: Double
    /// Nanoseconds.
    public var p50: Double
    public var p90: Double
    public var p99: Double

    public init(stack: String, endpoint: String, requests: UInt64, failures: Double, p50: Double, p90: Double, p99: Double) {
        (self.stack, self.endpoint, self.requests, self.failures) = (stack, endpoint, requests, failures)
        (self.p50, self.p90, self.p99) = (p50, p90, p99)
    }
}

/// What one stack's work cost the phones that run it.
public struct StackEnergy: Sendable, Equatable {
    public var stack: String
    public var devices: Int
    public var deviceHours: Double
    public var radioJoules: Double
    public var cpuJoules: Double
    public var bytesUp: Double
    public var bytesDown: Double
    public var radioSeconds: Double
    /// The mean battery capacity of its devices, in joules.
    public var capacityJoules: Double

    public var joules: Double { radioJoules + cpuJoules }
    public var joulesPerDeviceHour: Double { deviceHours > 0 ? joules / deviceHours : 0 }
    /// Percent of a battery per device-day at this rate.
    public var batteryPercentPerDay: Double { capacityJoules > 0 ? joulesPerDeviceHour * 24 / capacityJoules * 100 : 0 }
}

/// What a stack's work took of each device's battery a day, across the devices that run
/// it (`energy.device_day`): the phones the fleet-wide figure averages away.
public struct DeviceEnergySpread: Sendable, Equatable {
    /// A stack, or `all` for every stack a device runs together.
    public var stack: String
    /// One population (nil: every population that runs the stack).
    public var population: String?
    public var devices: UInt64
    /// Percent of a battery a day.
    public var p50: Double
    public var p90: Double
    public var p99: Double
    public var max: Double

    public init(stack: String, population: String?, devices: UInt64, p50: Double, p90: Double, p99: Double, max: Double) {
        (self.stack, self.population, self.devices) = (stack, population, devices)
        (self.p50, self.p90, self.p99, self.max) = (p50, p90, p99, max)
    }
}

/// The sync cadence each power state kept, and what a sync costs.
public struct SyncCost: Sendable, Equatable {
    public struct Cadence: Sendable, Equatable {
        public var powerState: String
        public var intervals: UInt64
        /// Nanoseconds.
        public var p50: Double
        public var syncsPerHour: Double { p50 > 0 ? 3_600e9 / p50 : 0 }
    }

    public var syncs: Double
    public var joulesPerSync: Double
    public var cadence: [Cadence]
    /// Percent of a battery per day a device syncing at `cadence` spends on sync.
    public var capacityJoules: Double

    public func batteryPercentPerDay(_ cadence: Cadence) -> Double {
        capacityJoules > 0 ? cadence.syncsPerHour * 24 * joulesPerSync / capacityJoules * 100 : 0
    }
}

/// Figures read off a results database, shared by the dashboard, `fleetlab simulate`'s
/// summary and `fleetlab sweep`.
public enum RunFigures {
    /// The client stacks a run can have, in the order figures list them (the simulator's
    /// `StackKind` order; Reports reads results, not the simulator).
    public static let stacks = ["workflows", "sync", "chat", "agent", "ai-bridge", "desktop-bridge"]

    /// Every endpoint with requests, by stack then endpoint.
    public static func endpoints(_ results: RunResults) -> [EndpointFigure] {
        results.metrics(named: "http.latency").compactMap { metric in
            let h = results.histogram(metric)
            guard !h.isEmpty, let stack = metric.label("stack"), let endpoint = metric.label("endpoint") else { return nil }
            let failures = results.total("http.failures", labels: metric.labels) ?? 0
            // Every request made (`http.requests`) when the run counted them; runs from
            // before it timed only the answered ones.
            let requests = results.total("http.requests", labels: metric.labels).map { UInt64($0) } ?? h.totalCount
            return EndpointFigure(stack: stack, endpoint: endpoint, requests: requests, failures: failures,
                                  p50: Double(h.value(atPercentile: 50)), p90: Double(h.value(atPercentile: 90)), p99: Double(h.value(atPercentile: 99)))
        }.sorted { ($0.stack, $0.endpoint) < ($1.stack, $1.endpoint) }
    }

    /// A load test's failed requests by endpoint and why (`http.errors`), the most first.
    public static func errors(_ results: RunResults) -> [(stack: String, endpoint: String, reason: String, count: Double)] {
        results.metrics(named: "http.errors").compactMap { metric in
            guard let stack = metric.label("stack"), let endpoint = metric.label("endpoint"), let reason = metric.label("reason"),
                  let count = results.total("http.errors", labels: metric.labels), count > 0 else { return nil }
            return (stack, endpoint, reason, count)
        }.sorted { ($1.count, $0.stack, $0.endpoint, $0.reason) < ($0.count, $1.stack, $1.endpoint, $1.reason) }
    }

    /// The populations running each stack (from their stored parameters), and their
    /// battery capacities.
    static func populations(_ results: RunResults) -> [(count: Int, stacks: Set<String>, capacityJoules: Double)] {
        results.deviceClasses.map { row in
            let parameters = try? JSONValue.parse(row.parameters)
            let stacks = Set(parameters?["stacks"]?.arrayValue?.compactMap(\.stringValue) ?? [])
            let capacity = (parameters?["power"]?["capacityWh"]?.numberValue ?? 13) * 3_600
            return (row.count, stacks, capacity)
        }
    }

    /// Energy per stack that ran, in stack order.
    public static func energy(_ results: RunResults) -> [StackEnergy] {
        let hours = Double(results.scenario.durationNanoseconds) / 3_600e9
        let populations = populations(results)
        return stacks.compactMap { stack in
            guard results.metric(named: "energy.joules", labels: "part=radio,stack=\(stack)") != nil else { return nil }
            let running = populations.filter { $0.stacks.contains(stack) }
            let devices = running.reduce(0) { $0 + $1.count }
            let capacity = devices > 0 ? running.reduce(0.0) { $0 + Double($1.count) * $1.capacityJoules } / Double(devices) : 0
            let total = { (name: String, labels: String) in results.total(name, labels: labels) ?? 0 }
            return StackEnergy(stack: stack, devices: devices, deviceHours: Double(devices) * hours,
                               radioJoules: total("energy.joules", "part=radio,stack=\(stack)"), cpuJoules: total("energy.joules", "part=cpu,stack=\(stack)"),
                               bytesUp: total("network.bytes", "direction=up,stack=\(stack)"), bytesDown: total("network.bytes", "direction=down,stack=\(stack)"),
                               radioSeconds: total("radio.seconds", "stack=\(stack)"), capacityJoules: capacity)
        }
    }

    /// Each stack's cost per device: every stack together first, over the whole fleet and
    /// then population by population (when there are several), then each stack over the
    /// fleet, in stack order (empty: a run from before the figure, or with no stack).
    public static func deviceEnergy(_ results: RunResults) -> [DeviceEnergySpread] {
        let metrics = results.metrics(named: "energy.device_day")
        func spread(_ stack: String, _ population: String?) -> DeviceEnergySpread? {
            var h: LogLinearHistogram?
            for metric in metrics where metric.label("stack") == stack && (population == nil || metric.label("population") == population) {
                let part = results.histogram(metric)
                if h == nil { h = part } else { h!.merge(part) }
            }
            guard let h, !h.isEmpty else { return nil }
            let percent = { (centipercent: UInt64) in Double(centipercent) / 100 }
            return DeviceEnergySpread(stack: stack, population: population, devices: h.totalCount, p50: percent(h.value(atPercentile: 50)),
                                      p90: percent(h.value(atPercentile: 90)), p99: percent(h.value(atPercentile: 99)), max: percent(h.maximum))
        }
        let populations = metrics.filter { $0.label("stack") == "all" }.compactMap { $0.label("population") }
        let byPopulation = populations.count > 1 ? populations.compactMap { spread("all", $0) } : []
        return [spread("all", nil)].compactMap { $0 } + byPopulation + stacks.compactMap { spread($0, nil) }
    }

    /// The sync cadence by power state and the energy of one sync; nil without sync.
    public static func syncCost(_ results: RunResults) -> SyncCost? {
        guard let energy = energy(results).first(where: { $0.stack == "sync" }) else { return nil }
        let syncs = results.total(allLabelsOf: "sync.requests")
        let cadence: [SyncCost.Cadence] = PowerState.allCases.compactMap { state in
            guard let metric = results.metric(named: "sync.interval", labels: "power_state=\(state.description)") else { return nil }
            let h = results.histogram(metric)
            guard !h.isEmpty else { return nil }
            return SyncCost.Cadence(powerState: state.description, intervals: h.totalCount, p50: Double(h.value(atPercentile: 50)))
        }
        return SyncCost(syncs: syncs, joulesPerSync: syncs > 0 ? energy.joules / syncs : 0, cadence: cadence, capacityJoules: energy.capacityJoules)
    }
}
