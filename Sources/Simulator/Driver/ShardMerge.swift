public import LabKernel
public import LabStore

/// The results of a fleet run split into shards (`--shard I/N`), merged into one database
/// the dashboard and `fleetlab compare` read like a single run's.
///
/// Counters add; histograms add bucket by bucket, so every percentile is exact; series
/// align by bucket start, counters' adding and gauges' merging by what they measure
/// (`GaugeMerge`). Invariants add their checks and violations (one checked once per run,
/// like `workflow.instances_accounted`, was checked once per shard); thresholds are evaluated
/// again on the merged data (a p99 of the whole fleet is not any shard's p99). Metric ids
/// are renumbered by first appearance, shard by shard; event samples are the union of the
/// shards', in time order.
public enum ShardMerge {
    public struct Failure: Error, CustomStringConvertible, Equatable {
        public var description: String
    }

    public static func merge(_ shards: [(path: String, results: RunResults)]) throws(Failure) -> RunResults {
        let ordered = try validated(shards)
        let first = ordered[0].results
        let shifts = startShifts(ordered.map(\.results))
        var merged = RunResults(scenario: first.scenario)
        merged.scenario.durationNanoseconds = zip(ordered, shifts).map { $0.results.scenario.durationNanoseconds + $1 }.max() ?? first.scenario.durationNanoseconds
        merged.scenario.devices = ordered.reduce(0) { $0 + $1.results.scenario.devices }

        var firstDevice = 0
        merged.deviceClasses = first.deviceClasses.map { c in
            let count = ordered.reduce(0) { sum, shard in sum + (shard.results.deviceClasses.first { $0.id == c.id }?.count ?? 0) }
            defer { firstDevice += count }
            return DeviceClassRow(id: c.id, name: c.name, count: count, firstDevice: firstDevice, parameters: c.parameters)
        }

        // Metrics by (name, labels), numbered by first appearance.
        struct Key: Hashable { var name: String; var labels: String }
        var idOf: [Key: Int] = [:]
        var maps: [[Int: Int]] = []
        for shard in ordered {
            var map: [Int: Int] = [:]
            for metric in shard.results.metrics {
                let key = Key(name: metric.name, labels: metric.labels)
                if let id = idOf[key] {
                    map[metric.id] = id
                } else {
                    let id = merged.metrics.count
                    idOf[key] = id
                    map[metric.id] = id
                    var copy = metric
                    copy.id = id
                    merged.metrics.append(copy)
                }
            }
            maps.append(map)
        }

        var histogram: [Int: [HistogramKey: HistogramBucketRow]] = [:]
        var points: [Int: [Int64: [(value: Double, devices: Int)]]] = [:]
        for ((shard, map), shift) in zip(zip(ordered, maps), shifts) {
            let devices = shard.results.scenario.devices
            for (id, total) in shard.results.counterTotals { merged.counterTotals[map[id]!, default: 0] += total }
            for (id, rows) in shard.results.histogramRows {
                let target = map[id]!
                for var row in rows {
                    if row.windowStart != HistogramBucketRow.wholeRun { row.windowStart += shift }
                    let key = HistogramKey(window: row.windowStart, bucket: row.bucketIndex)
                    if var existing = histogram[target]?[key] {
                        existing.count += row.count
                        histogram[target]![key] = existing
                    } else {
                        var copy = row
                        copy.metricID = target
                        histogram[target, default: [:]][key] = copy
                    }
                }
            }
            for (id, rows) in shard.results.series {
                for row in rows { points[map[id]!, default: [:]][row.bucketStart + shift, default: []].append((row.value, devices)) }
            }
        }
        for (id, rows) in histogram { merged.histogramRows[id] = rows.values.sorted { ($0.windowStart, $0.bucketIndex) < ($1.windowStart, $1.bucketIndex) } }
        for (id, byBucket) in points {
            let metric = merged.metrics[id]
            let rule = metric.kind == .gauge ? GaugeMerge.rule(for: metric.name) : .sum
            merged.series[id] = byBucket.keys.sorted().map { start in
                SeriesPointRow(metricID: id, bucketStart: start, value: rule.combine(byBucket[start]!))
            }
        }

        var sequence: Int64 = 0
        merged.events = ordered.enumerated().flatMap { index, shard in
            shard.results.events.map { event in
                var moved = event
                moved.at += shifts[index]
                return (index, moved)
            }
        }
            .sorted { ($0.1.at, $0.0, $0.1.seq) < ($1.1.at, $1.0, $1.1.seq) }
            .map { _, event in
                defer { sequence += 1 }
                return EventSampleRow(seq: sequence, at: event.at, device: event.device, kind: event.kind, detail: event.detail)
            }

        var invariantNames: [String] = []
        for shard in ordered { for row in shard.results.invariants where !invariantNames.contains(row.name) { invariantNames.append(row.name) } }
        merged.invariants = invariantNames.sorted().map { name in
            let rows = ordered.compactMap { shard in shard.results.invariants.first { $0.name == name } }
            return InvariantResultRow(name: name, checks: rows.reduce(0) { $0 + $1.checks }, violations: rows.reduce(0) { $0 + $1.violations },
                                      firstViolation: rows.lazy.compactMap(\.firstViolation).first)
        }
        merged.thresholds = ThresholdEvaluator.evaluate(first.thresholds.compactMap(Threshold.init(result:)), recorder: merged)

        let walls = ordered.map { $0.results.runMetadata["wall_seconds"].flatMap(Double.init) ?? 0 }
        let events = ordered.reduce(0.0) { $0 + ($1.results.runMetadata["events"].flatMap(Double.init) ?? 0) }
        merged.runMetadata = [
            "seed": String(first.scenario.seed), "scenario_sha256": first.scenario.sha256,
            "build": first.runMetadata["build"] ?? "", "shards": String(ordered.count),
            "merged_from": ordered.map(\.path).joined(separator: "\n"),
            "shard_wall_seconds": walls.map { String($0) }.joined(separator: ","),
            "wall_seconds": String(walls.max() ?? 0), "events": String(events),
            "simulated_ns": first.runMetadata["simulated_ns"] ?? "", "interrupted": "false",
        ]
        if first.runMetadata["mode"] == "loadtest" { merged.runMetadata.merge(loadTestMetadata(ordered.map(\.results)), uniquingKeysWith: { _, new in new }) }
        return merged
    }

    /// How far each shard's times move on the merged time axis: a load test's generators
    /// started at their own wall-clock moments (`started_at_unix_ms`), so each is moved by
    /// its start's distance from the earliest, in whole buckets; a simulation's shards all
    /// start at the scenario's zero and are not moved.
    static func startShifts(_ shards: [RunResults]) -> [Int64] {
        let starts = shards.compactMap { $0.runMetadata["started_at_unix_ms"].flatMap(Int64.init) }
        guard starts.count == shards.count, let earliest = starts.min() else { return shards.map { _ in 0 } }
        let bucket = max(1, shards[0].scenario.bucketNanoseconds)
        return starts.map { start in
            let ns = (start - earliest) * 1_000_000
            return (ns + bucket / 2) / bucket * bucket
        }
    }

    /// A load test's generators as one run: its targets and workload, the earliest start,
    /// the generators' CPU (the mean of their shares of their own machines, and the busiest
    /// bucket of any).
    static func loadTestMetadata(_ shards: [RunResults]) -> [String: String] {
        let distinct = { (key: String) in
            shards.compactMap { $0.runMetadata[key] }.reduce(into: [String]()) { if !$0.contains($1) { $0.append($1) } }.joined(separator: "; ")
        }
        let cpu = shards.map { $0.runMetadata["generator_cpu_percent"].flatMap(Double.init) ?? 0 }
        return ["mode": "loadtest", "targets": distinct("targets"), "tenant": distinct("tenant"),
                "model": "\(shards.count) generators: " + distinct("model"),
                "started_at": shards.compactMap { $0.runMetadata["started_at"] }.min() ?? "",
                "generator_cpu_percent": String(cpu.reduce(0, +) / Double(max(1, cpu.count))),
                "generator_cpu_percent_max": String(shards.compactMap { $0.runMetadata["generator_cpu_percent_max"].flatMap(Double.init) }.max() ?? 0)]
    }

    struct HistogramKey: Hashable {
        var window: Int64
        var bucket: Int
    }

    /// The shards in index order, after checking they are one run's complete set.
    static func validated(_ shards: [(path: String, results: RunResults)]) throws(Failure) -> [(path: String, results: RunResults)] {
        guard !shards.isEmpty else { throw Failure(description: "no shards given") }
        var byIndex: [Int: (path: String, results: RunResults)] = [:]
        var total: Int?
        for shard in shards {
            guard let text = shard.results.runMetadata["shard"], let slice = FleetShard(parsing: text) else {
                throw Failure(description: "\(shard.path) is not a shard's results (it was not run with --shard I/N)")
            }
            if let total, total != slice.count {
                throw Failure(description: "\(shard.path) is shard \(slice) but the others are of \(total)")
            }
            total = slice.count
            if let other = byIndex[slice.index] { throw Failure(description: "\(shard.path) and \(other.path) are both shard \(slice)") }
            byIndex[slice.index] = shard
            let reference = shards[0].results
            guard shard.results.scenario.sha256 == reference.scenario.sha256, shard.results.scenario.seed == reference.scenario.seed else {
                throw Failure(description: "\(shard.path) ran another scenario or seed than \(shards[0].path)")
            }
            guard shard.results.runMetadata["build"] == reference.runMetadata["build"] else {
                throw Failure(description: "\(shard.path) was built as \(shard.results.runMetadata["build"] ?? "?"), \(shards[0].path) as \(reference.runMetadata["build"] ?? "?")")
            }
            if shard.results.runMetadata["interrupted"] == "true" {
                throw Failure(description: "\(shard.path) was interrupted; run that shard again")
            }
        }
        let missing = (0..<(total ?? 0)).filter { byIndex[$0] == nil }
        guard missing.isEmpty else {
            throw Failure(description: "missing shard\(missing.count == 1 ? "" : "s") " + missing.map { "\($0)/\(total!)" }.joined(separator: ", "))
        }
        return (0..<total!).map { byIndex[$0]! }
    }
}

/// How a gauge's bucket values from several shards become the fleet's: counts of devices
/// and queues add, a mean over devices is weighted by each shard's devices, each shard's
/// server is one replica (utilisation is their mean), and a fault in force is in force.
public enum GaugeMerge: Equatable, Sendable {
    case sum, deviceWeightedMean, mean, max

    public static func rule(for metric: String) -> GaugeMerge {
        switch metric {
        case "battery.mean": return .deviceWeightedMean
        case "faults.active": return .max
        default: return metric.hasSuffix("_utilisation") ? .mean : .sum
        }
    }

    func combine(_ values: [(value: Double, devices: Int)]) -> Double {
        switch self {
        case .sum: return values.reduce(0) { $0 + $1.value }
        case .max: return values.map(\.value).max() ?? 0
        case .mean: return values.isEmpty ? 0 : values.reduce(0) { $0 + $1.value } / Double(values.count)
        case .deviceWeightedMean:
            let devices = values.reduce(0) { $0 + $1.devices }
            return devices == 0 ? 0 : values.reduce(0) { $0 + $1.value * Double($1.devices) } / Double(devices)
        }
    }
}

extension Threshold {
    /// A threshold as a results database states it (`http.latency{stack=sync}`, `p99`,
    /// `<=`, the bound in the metric's unit; a ratio's statistic is `per NAME{…}`), to
    /// evaluate it again on other data.
    init?(result row: ThresholdResultRow) {
        let (name, labels) = Self.metric(row.metric)
        var per: ThresholdDenominator?
        let statistic: ThresholdStatistic
        switch row.statistic {
        case "mean": statistic = .mean
        case "max": statistic = .max
        case "min": statistic = .min
        case "count": statistic = .count
        case "total": statistic = .total
        case "last": statistic = .last
        case let text where text.hasPrefix("per "):
            let (whole, wholeLabels) = Self.metric(String(text.dropFirst(4)))
            per = ThresholdDenominator(metric: whole, labels: wholeLabels)
            statistic = MetricCatalog.entry(named: name)?.kind == .histogram ? .count : .total
        default:
            guard row.statistic.hasPrefix("p"), let p = Double(row.statistic.dropFirst()) else { return nil }
            statistic = .percentile(p)
        }
        let entry = MetricCatalog.entry(named: name)
        let unit = per == nil ? entry?.unit ?? .count : entry?.unit.ratioUnit ?? .share
        self.init(metric: name, labels: labels, statistic: statistic, bound: row.op == ">=" ? .atLeast(row.bound) : .atMost(row.bound),
                  boundText: per == nil ? unit.format(row.bound) : unit.formatRatio(row.bound), per: per)
    }

    /// `name{key=value,…}` taken apart.
    static func metric(_ text: String) -> (name: String, labels: [String: String]) {
        guard let open = text.firstIndex(of: "{"), text.hasSuffix("}") else { return (text, [:]) }
        var labels: [String: String] = [:]
        for (key, value) in MetricDescriptor.labelPairs(of: String(text[text.index(after: open)..<text.index(before: text.endIndex)])) { labels[key] = value }
        return (String(text[..<open]), labels)
    }
}
