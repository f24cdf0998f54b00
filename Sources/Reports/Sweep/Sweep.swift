public import LabStore
import LabKernel

/// One point of a capacity sweep: the scenario run at one fleet size, as figures.
public struct SweepPoint: Sendable {
    /// One server's load over the run.
    public struct ServerLoad: Sendable, Equatable {
        public var stack: String
        /// Utilisation of the busiest bucket, and the mean over buckets, in percent.
        public var peakUtilisation: Double
        public var meanUtilisation: Double
        /// The longest queue at a bucket end, and the wait for a worker (p99, ns).
        public var peakQueue: Double
        public var waitP99: Double

        public init(stack: String, peakUtilisation: Double, meanUtilisation: Double, peakQueue: Double, waitP99: Double) {
            (self.stack, self.peakUtilisation, self.meanUtilisation) = (stack, peakUtilisation, meanUtilisation)
            (self.peakQueue, self.waitP99) = (peakQueue, waitP99)
        }
    }

    public var devices: Int
    public var resultsPath: String
    public var endpoints: [EndpointFigure]
    public var servers: [ServerLoad]
    public var energy: [StackEnergy]
    /// What a device spent of its battery a day, across the fleet (every population).
    public var deviceEnergy: [DeviceEnergySpread]
    /// Of those, what every stack together took (the spread the sweep charts and judges).
    public var everyStackEnergy: DeviceEnergySpread? { deviceEnergy.first { $0.stack == "all" } }
    /// The invariants that failed at this size, by name.
    public var violated: [String]
    public var invariantsHeld: Bool { violated.isEmpty }
    public var wallSeconds: Double

    public init(devices: Int, resultsPath: String, endpoints: [EndpointFigure], servers: [ServerLoad], energy: [StackEnergy] = [],
                deviceEnergy: [DeviceEnergySpread] = [], violated: [String] = [], wallSeconds: Double) {
        (self.devices, self.resultsPath, self.endpoints, self.servers) = (devices, resultsPath, endpoints, servers)
        (self.energy, self.deviceEnergy, self.violated, self.wallSeconds) = (energy, deviceEnergy, violated, wallSeconds)
    }

    public init(devices: Int, resultsPath: String, results: RunResults, wallSeconds: Double) {
        self.devices = devices
        self.resultsPath = resultsPath
        self.wallSeconds = wallSeconds
        endpoints = RunFigures.endpoints(results)
        energy = RunFigures.energy(results)
        deviceEnergy = RunFigures.deviceEnergy(results).filter { $0.population == nil }
        violated = results.invariants.filter { !$0.passed }.map(\.name)
        servers = ["sync", "chat"].compactMap { stack in
            guard let utilisation = results.metric(named: "\(stack).server_utilisation") else { return nil }
            let series = (results.series[utilisation.id] ?? []).map(\.value)
            let queue = results.metric(named: "\(stack).server_queue").map { (results.series[$0.id] ?? []).map(\.value).max() ?? 0 } ?? 0
            let wait = results.metric(named: "\(stack).server_wait").map { results.histogram($0) }
            return ServerLoad(stack: stack, peakUtilisation: series.max() ?? 0, meanUtilisation: series.isEmpty ? 0 : series.reduce(0, +) / Double(series.count),
                              peakQueue: queue, waitP99: wait.map { $0.isEmpty ? 0 : Double($0.value(atPercentile: 99)) } ?? 0)
        }
    }
}

/// What a sweep found: where latency passes its budget and where each server saturates.
public enum SweepAnalysis {
    /// A server counts as saturated when its busiest bucket is this busy.
    public static let saturated = 95.0

    /// The findings as sentences, in a fixed order: each endpoint whose p99 passes
    /// `bound` (and the ones that never do), then each server's saturation point.
    /// Whether any server's busiest bucket at this point is saturated.
    public static func overloaded(_ point: SweepPoint) -> Bool {
        point.servers.contains { $0.peakUtilisation >= saturated }
    }

    /// The failures that are a verdict, not a capacity finding: an invariant that is not a
    /// progress check, or a progress check at a size where no server is saturated.
    public static func verdicts(_ points: [SweepPoint], progressChecks: Set<String>) -> [(devices: Int, invariant: String)] {
        points.sorted { $0.devices < $1.devices }.flatMap { point in
            point.violated.filter { !progressChecks.contains($0) || !overloaded(point) }.map { (point.devices, $0) }
        }
    }

    /// The share of a stack's requests that failed at a point (nil: it made none).
    public static func failureRate(_ point: SweepPoint, stack: String? = nil) -> Double? {
        let endpoints = point.endpoints.filter { stack == nil || $0.stack == stack }
        let requests = endpoints.reduce(0.0) { $0 + Double($1.requests) }
        return requests > 0 ? endpoints.reduce(0) { $0 + $1.failures } / requests : nil
    }

    /// `errorBudget`: the share of a stack's requests that may fail (k6's `http_req_failed`
    /// rate), which its failure rate is compared with at each size.
    public static func findings(_ points: [SweepPoint], bound: Double, errorBudget: Double = 0.01, progressChecks: Set<String> = []) -> [String] {
        let points = points.sorted { $0.devices < $1.devices }
        guard let last = points.last else { return [] }
        let count = { (n: Int) in MetricUnit.decimal(Double(n), digits: 0) }
        var lines: [String] = []
        for stack in RunFigures.stacks {
            let routes = Set(points.flatMap { $0.endpoints.filter { $0.stack == stack }.map(\.endpoint) }).sorted()
            guard !routes.isEmpty else { continue }
            // Endpoints that pass the budget between the same two sizes go in one sentence,
            // named by the worst of them at the larger size.
            var crossings: [Int: [(route: String, before: Double?, after: Double)]] = [:]
            var under: [String] = []
            for route in routes {
                let series = points.compactMap { point in point.endpoints.first { $0.stack == stack && $0.endpoint == route }.map { (point.devices, $0.p99) } }
                guard let crossing = series.firstIndex(where: { $0.1 > bound }) else {
                    under.append(route)
                    continue
                }
                crossings[series[crossing].0, default: []].append((route, crossing > 0 ? series[crossing - 1].1 : nil, series[crossing].1))
            }
            for size in crossings.keys.sorted() {
                let group = crossings[size]!.sorted { $0.after > $1.after }
                let worst = group[0]
                let what = group.count == 1 ? "\(stack) \(worst.route) p99" : "\(stack) p99 of \(group.count) endpoints (worst \(worst.route))"
                let previous = points.last { $0.devices < size }?.devices
                if let before = worst.before, let previous {
                    lines.append("\(what) passes \(MetricUnit.formatDuration(bound)) between \(count(previous)) and \(count(size)) devices "
                        + "(\(MetricUnit.formatDuration(before)) → \(MetricUnit.formatDuration(worst.after)))")
                } else {
                    lines.append("\(what) is past \(MetricUnit.formatDuration(bound)) already at \(count(size)) devices (\(MetricUnit.formatDuration(worst.after)))")
                }
            }
            if !under.isEmpty {
                lines.append("\(stack): " + (under.count == routes.count ? "every endpoint's" : "\(under.count) other endpoints'")
                    + " p99 stays under \(MetricUnit.formatDuration(bound)) up to \(count(last.devices)) devices")
            }
            // Failures grow past a knee as latency does: timeouts, refusals, queues full.
            let rates = points.compactMap { point in failureRate(point, stack: stack).map { (point.devices, $0) } }
            let share = { (rate: Double) in MetricUnit.share.format(rate) }
            if let crossing = rates.firstIndex(where: { $0.1 > errorBudget }) {
                let at = rates[crossing]
                // Past the budget from the smallest size (phones out of coverage fail some
                // requests at any load), what the fleet's growth does to it is the finding.
                let largest = rates[rates.count - 1]
                lines.append(crossing == 0
                    ? "\(stack) failure rate is past \(share(errorBudget)) already at \(count(at.0)) devices (\(share(at.1)) of its requests"
                        + (largest.0 > at.0 ? "; \(share(largest.1)) at \(count(largest.0)))" : ")")
                    : "\(stack) failure rate passes \(share(errorBudget)) between \(count(rates[crossing - 1].0)) and \(count(at.0)) devices "
                        + "(\(share(rates[crossing - 1].1)) → \(share(at.1)) of its requests)")
            } else if let worst = rates.max(by: { $0.1 < $1.1 }) {
                lines.append("\(stack): failure rate stays under \(share(errorBudget)) up to \(count(last.devices)) devices (at most \(share(worst.1)))")
            }
        }
        for stack in ["sync", "chat"] {
            let series = points.compactMap { point in point.servers.first { $0.stack == stack }.map { (point.devices, $0) } }
            guard !series.isEmpty else { continue }
            if let index = series.firstIndex(where: { $0.1.peakUtilisation >= saturated }) {
                let at = series[index]
                if index == 0 {
                    lines.append("\(stack) server is saturated already at \(count(at.0)) devices (busiest bucket \(percent(at.1.peakUtilisation)))")
                } else {
                    // Load grows with the fleet: from the last point below saturation, the
                    // size at which its busiest bucket would reach 100 %.
                    let before = series[index - 1]
                    let estimate = min(Double(at.0), max(Double(before.0), Double(before.0) * 100 / max(before.1.peakUtilisation, 0.001)))
                    lines.append("\(stack) server saturates at about \(count(Int(estimate.rounded()))) devices (busiest bucket \(percent(before.1.peakUtilisation)) "
                        + "at \(count(before.0)), \(percent(at.1.peakUtilisation)) at \(count(at.0)); queue up to \(count(Int(at.1.peakQueue))))")
                }
            } else if let top = series.last, top.1.peakUtilisation > 0 {
                let estimate = Double(top.0) * 100 / top.1.peakUtilisation
                lines.append("\(stack) server is not saturated up to \(count(top.0)) devices (busiest bucket \(percent(top.1.peakUtilisation))); "
                    + "at this load it would saturate near \(count(Int(estimate.rounded()))) devices")
            }
        }
        // The phones that pay most: their battery should not depend on the fleet's size.
        // Where it grows, retries and reconnects past a server's limit are paid in radio time.
        // A fifth more counts (and a tenth of a percent, so tiny costs do not ring).
        let tail = points.compactMap { point in point.everyStackEnergy.map { (point.devices, $0.p99) } }
        if let first = tail.first, let top = tail.max(by: { $0.1 < $1.1 }), top.0 > first.0, top.1 >= first.1 * 1.2 + 0.1 {
            lines.append("the phones that pay most spend more at scale: battery p99 (every stack) \(percent(first.1)) a day at \(count(first.0)) devices, "
                + "\(percent(top.1)) at \(count(top.0))")
        }
        // Progress that stops once a server cannot keep up, from the first size it fails at.
        var reported: Set<String> = []
        for point in points where overloaded(point) {
            for name in point.violated where progressChecks.contains(name) && reported.insert(name).inserted {
                lines.append("\(name) fails from \(count(point.devices)) devices, past a server's saturation: it no longer keeps up")
            }
        }
        for (devices, name) in verdicts(points, progressChecks: progressChecks) {
            lines.append("invariant \(name) FAILED at \(count(devices)) devices (see its results)")
        }
        return lines
    }

    public static func percent(_ value: Double) -> String { MetricUnit.decimal(value, digits: value < 10 ? 1 : 0) + "%" }
}
