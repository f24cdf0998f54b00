public import LabStore
public import LabKernel

/// Two runs side by side: every metric's figures (histogram percentiles, counter totals,
/// gauge means), thresholds and invariants, each change with its direction, and a verdict
/// against the limits a CI job sets.
///
/// Theory of operation. Runs are deterministic, so a difference is never noise: it is what
/// a change to the scenario, the seed or the build did. What the comparison decides is
/// whether a difference is a *regression*: a figure moved in its worse direction (latency
/// up, failures up, battery down) by more than the limit that applies to it. Figures
/// without a direction (request counts, sync cadence: a trade-off, not a score) are shown
/// and only judged when a `--metric` limit names them. When both runs have the same
/// digest, they are identical and nothing else is computed.
public struct RunComparison: Sendable {
    public var baseline: Side
    public var candidate: Side
    /// Both digests equal: the deterministic tables match row for row.
    public var identical: Bool
    public var figures: [ComparedFigure]
    public var thresholds: [ComparedCheck]
    public var invariants: [ComparedCheck]
    /// The latency histograms both runs have, for overlays.
    public var distributions: [ComparedDistribution]
    public var policy: ComparisonPolicy

    /// What identifies a run on the page and in the summary.
    public struct Side: Sendable {
        public var path: String
        public var scenario: String
        public var scenarioSHA256: String
        public var seed: UInt64
        public var devices: Int
        public var durationNanoseconds: Int64
        public var build: String
        public var digest: String
    }

    public init(baseline: RunResults, baselinePath: String, baselineDigest: String,
                candidate: RunResults, candidatePath: String, candidateDigest: String, policy: ComparisonPolicy = ComparisonPolicy()) {
        func side(_ r: RunResults, _ path: String, _ digest: String) -> Side {
            Side(path: path, scenario: r.scenario.name, scenarioSHA256: r.scenario.sha256, seed: r.scenario.seed,
                 devices: r.scenario.devices, durationNanoseconds: r.scenario.durationNanoseconds,
                 build: r.runMetadata["build"] ?? "unknown build", digest: digest)
        }
        self.baseline = side(baseline, baselinePath, baselineDigest)
        self.candidate = side(candidate, candidatePath, candidateDigest)
        self.policy = policy
        identical = baselineDigest == candidateDigest
        guard !identical else {
            figures = []; thresholds = []; invariants = []; distributions = []
            return
        }
        let b = FigureTable(baseline), c = FigureTable(candidate)
        var figures: [ComparedFigure] = []
        for key in Set(b.values.keys).union(c.values.keys).sorted() {
            let described = b.values[key] ?? c.values[key]!
            // Failures are judged as a rate where both runs have one: their count follows the
            // number of requests, which is the load, not the system's health.
            let rateKey = FigureTable.Key(metric: key.metric, labels: key.labels, statistic: "rate")
            let byRate = key.statistic == "total" && b.values[rateKey] != nil && c.values[rateKey] != nil
            var figure = ComparedFigure(metric: key.metric, labels: key.labels, statistic: key.statistic, unit: described.unit,
                                        baseline: b.values[key]?.value, candidate: c.values[key]?.value,
                                        better: byRate ? .neither
                                            : MetricDirection.better(metric: key.metric, labels: key.labels, statistic: key.statistic, unit: described.unit))
            let samples = min(b.values[key]?.samples ?? 0, c.values[key]?.samples ?? 0)
            // A maximum is one sample (or one bucket): shown with its direction, never judged.
            figure.judged = figure.better != .neither && samples >= policy.minSamples && key.statistic != "max"
            // A counter better lower that the candidate lacks counted nothing there: no
            // retries recorded is no retry, which is not worse. Any other judged figure gone is.
            let zeroIsBest = key.statistic == "total" && figure.better == .lower
            figure.gone = figure.better != .neither && key.statistic != "max" && !zeroIsBest && c.values[key] == nil
                && (b.values[key]?.samples ?? 0) >= policy.minSamples
            figures.append(figure)
        }
        self.figures = figures
        thresholds = Self.checks(baseline.thresholds.map { (baseline.title(of: $0, unitsFrom: candidate), $0.passed, $0.message) },
                                 candidate.thresholds.map { (candidate.title(of: $0, unitsFrom: baseline), $0.passed, $0.message) })
        invariants = Self.checks(baseline.invariants.map { ($0.name, $0.passed, "\($0.violations) of \($0.checks) checks violated") },
                                 candidate.invariants.map { ($0.name, $0.passed, "\($0.violations) of \($0.checks) checks violated") })
        distributions = baseline.metrics.filter { $0.kind == .histogram && $0.unit == MetricUnit.nanoseconds.rawValue }.compactMap { metric in
            guard let other = candidate.metric(named: metric.name, labels: metric.labels) else { return nil }
            let before = baseline.histogram(metric), after = candidate.histogram(other)
            guard !before.isEmpty, !after.isEmpty else { return nil }
            return ComparedDistribution(metric: metric.name, labels: metric.labels, baseline: before, candidate: after)
        }
    }

    /// Thresholds or invariants of both runs matched by name, in the order they first appear.
    static func checks(_ before: [(String, Bool, String)], _ after: [(String, Bool, String)]) -> [ComparedCheck] {
        var names: [String] = []
        for (name, _, _) in before + after where !names.contains(name) { names.append(name) }
        return names.map { name in
            let b = before.first { $0.0 == name }, c = after.first { $0.0 == name }
            return ComparedCheck(name: name, baselinePassed: b?.1, candidatePassed: c?.1, baselineDetail: b?.2, candidateDetail: c?.2)
        }
    }

    public var sameScenario: Bool { baseline.scenarioSHA256 == candidate.scenarioSHA256 }
}

/// One figure of one metric in both runs.
public struct ComparedFigure: Sendable, Equatable {
    public var metric: String
    public var labels: String
    /// "p50", "p90", "p99", "max", "count" for histograms; "total" for counters; "mean"
    /// and "max" over the series for gauges.
    public var statistic: String
    public var unit: MetricUnit
    public var baseline: Double?
    public var candidate: Double?
    public var better: MetricDirection.Better
    /// Counted for the verdict: it has a direction and enough samples in both runs.
    public var judged = false
    /// The baseline would judge it (a direction, enough samples) and the candidate does not
    /// have it: what a build that stopped doing or recording something shows.
    public var gone = false

    /// `metric{labels} statistic`, the name `--metric` limits and the reports use.
    public var name: String { metric + (labels.isEmpty ? "" : "{\(labels)}") + " " + statistic }

    /// (candidate − baseline) / |baseline|; infinite when the baseline is 0 and the
    /// candidate is not; nil when a run lacks the figure.
    public var change: Double? {
        guard let baseline, let candidate else { return nil }
        if baseline == candidate { return 0 }
        if baseline == 0 { return candidate > 0 ? .infinity : -.infinity }
        return (candidate - baseline) / abs(baseline)
    }

    /// How far the figure moved in its worse direction, as a fraction (0 when it improved,
    /// did not move or has no direction).
    public var regression: Double {
        guard let change else { return 0 }
        switch better {
        case .lower: return max(0, change)
        case .higher: return max(0, -change)
        case .neither: return 0
        }
    }

    public var improved: Bool {
        guard let change, change != 0 else { return false }
        switch better {
        case .lower: return change < 0
        case .higher: return change > 0
        case .neither: return false
        }
    }
}

/// A threshold or an invariant in both runs (nil where a run does not have it).
public struct ComparedCheck: Sendable, Equatable {
    public var name: String
    public var baselinePassed: Bool?
    public var candidatePassed: Bool?
    public var baselineDetail: String?
    public var candidateDetail: String?
}

/// A latency histogram of both runs, for the overlay.
public struct ComparedDistribution: Sendable {
    public var metric: String
    public var labels: String
    public var baseline: LogLinearHistogram
    public var candidate: LogLinearHistogram

    public var name: String { metric + (labels.isEmpty ? "" : "{\(labels)}") }
}

/// Every figure of a run by (metric, labels, statistic), with how many samples it rests on.
struct FigureTable {
    struct Key: Hashable, Comparable {
        var metric: String
        var labels: String
        var statistic: String
        static func < (a: Key, b: Key) -> Bool { (a.metric, a.labels, a.statistic) < (b.metric, b.labels, b.statistic) }
    }

    var values: [Key: (value: Double, unit: MetricUnit, samples: Int)] = [:]

    /// Percentiles shown for each histogram.
    static let percentiles: [(String, Double)] = [("p50", 50), ("p90", 90), ("p99", 99)]

    init(_ results: RunResults) {
        for metric in results.metrics {
            let unit = MetricUnit(rawValue: metric.unit) ?? .count
            func put(_ statistic: String, _ value: Double, samples: Int) {
                values[Key(metric: metric.name, labels: metric.labels, statistic: statistic)] = (value, unit, samples)
            }
            switch metric.kind {
            case .histogram:
                let histogram = results.histogram(metric)
                guard !histogram.isEmpty else { continue }
                let samples = Int(clamping: histogram.totalCount)
                for (name, percentile) in Self.percentiles {
                    put(name, Double(histogram.value(atPercentile: percentile)), samples: samples)
                }
                put("max", Double(histogram.value(atPercentile: 100)), samples: samples)
                values[Key(metric: metric.name, labels: metric.labels, statistic: "count")] = (Double(histogram.totalCount), .count, samples)
            case .counter:
                // A counter is one exact total: it needs no sample floor.
                let total = results.counterTotals[metric.id] ?? 0
                put("total", total, samples: Int.max)
                // Failures as a share of the requests made (k6's `http_req_failed` rate), which a
                // run with more or fewer requests than the other (a load test always has)
                // does not move; it rests on the requests as its samples.
                if metric.name == "http.failures", let requests = results.total("http.requests", labels: metric.labels), requests > 0 {
                    values[Key(metric: metric.name, labels: metric.labels, statistic: "rate")] = (total / requests, .share, Int(clamping: UInt64(requests)))
                }
            case .gauge:
                let points = results.series[metric.id] ?? []
                guard !points.isEmpty else { continue }
                let mean = points.reduce(0) { $0 + $1.value } / Double(points.count)
                put("mean", mean, samples: Int.max)
                put("max", points.map(\.value).max() ?? 0, samples: Int.max)
            }
        }
    }
}
