public import LabKernel

/// A whole results database read into memory, for dashboards, comparisons and tests.
public struct RunResults: Sendable {
    public var scenario: ScenarioRow
    public var deviceClasses: [DeviceClassRow]
    public var metrics: [MetricDescriptor]
    /// Series points per metric id, in bucket order.
    public var series: [Int: [SeriesPointRow]]
    public var counterTotals: [Int: Double]
    public var histogramRows: [Int: [HistogramBucketRow]]
    public var events: [EventSampleRow]
    public var thresholds: [ThresholdResultRow]
    public var invariants: [InvariantResultRow]
    public var runMetadata: [String: String]

    public init(scenario: ScenarioRow, deviceClasses: [DeviceClassRow] = [], metrics: [MetricDescriptor] = [],
                series: [Int: [SeriesPointRow]] = [:], counterTotals: [Int: Double] = [:],
                histogramRows: [Int: [HistogramBucketRow]] = [:], events: [EventSampleRow] = [],
                thresholds: [ThresholdResultRow] = [], invariants: [InvariantResultRow] = [], runMetadata: [String: String] = [:]) {
        self.scenario = scenario
        self.deviceClasses = deviceClasses
        self.metrics = metrics
        self.series = series
        self.counterTotals = counterTotals
        self.histogramRows = histogramRows
        self.events = events
        self.thresholds = thresholds
        self.invariants = invariants
        self.runMetadata = runMetadata
    }

    /// Metrics named `name`, in id order (one per label set).
    public func metrics(named name: String) -> [MetricDescriptor] {
        metrics.filter { $0.name == name }
    }

    public func metric(named name: String, labels: String = "") -> MetricDescriptor? {
        metrics.first { $0.name == name && $0.labels == labels }
    }

    public func total(_ name: String, labels: String = "") -> Double? {
        metric(named: name, labels: labels).flatMap { counterTotals[$0.id] }
    }

    /// Sum of the totals of every label set of `name`.
    public func total(allLabelsOf name: String) -> Double {
        metrics(named: name).reduce(0) { $0 + (counterTotals[$1.id] ?? 0) }
    }

    /// The whole-run histogram of a metric: every window merged.
    public func histogram(_ metric: MetricDescriptor) -> LogLinearHistogram {
        var histogram = LogLinearHistogram(precisionBits: metric.precisionBits ?? 7)
        for row in histogramRows[metric.id] ?? [] {
            histogram.add(bucket: row.bucketIndex, count: row.count, lowerBound: row.lowerBound)
        }
        return histogram
    }

    /// The histogram of one time window of a metric.
    public func histogram(_ metric: MetricDescriptor, window: Int64) -> LogLinearHistogram {
        var histogram = LogLinearHistogram(precisionBits: metric.precisionBits ?? 7)
        for row in histogramRows[metric.id] ?? [] where row.windowStart == window {
            histogram.add(bucket: row.bucketIndex, count: row.count, lowerBound: row.lowerBound)
        }
        return histogram
    }

    public var thresholdsPassed: Bool { thresholds.allSatisfy(\.passed) }
    /// A load test still going (`fleetlab loadtest --dashboard-port` renders its results as
    /// it runs): its totals, thresholds and wall time are written at its end, so `load()`
    /// gives its counters the sum of the buckets written so far.
    public var isRunning: Bool { runMetadata["mode"] == "loadtest" && runMetadata["wall_seconds"] == nil }
    public var invariantsPassed: Bool { invariants.allSatisfy(\.passed) }
    /// A load test's iterations ran and not one succeeded: the targets refused them all (a
    /// wrong key, URL or server). Such a run shows nothing about the targets' capacity, so
    /// it fails with or without thresholds; some failures among successes are the
    /// thresholds' to judge, as in k6. False for a simulation (no iterations).
    public var nothingSucceeded: Bool {
        (total("loadtest.iterations", labels: "outcome=ok") ?? 0) == 0 && (total("loadtest.iterations", labels: "outcome=failed") ?? 0) > 0
    }

    /// Bucket start times present in any series, ascending.
    public var bucketStarts: [Int64] {
        let count = scenario.bucketNanoseconds > 0
            ? Int((scenario.durationNanoseconds + scenario.bucketNanoseconds - 1) / scenario.bucketNanoseconds) : 0
        return (0..<count).map { Int64($0) * scenario.bucketNanoseconds }
    }
}

extension ResultsDatabase {
    /// Reads every table.
    public func load() throws -> RunResults {
        guard let s = try database.query(
            "SELECT name, text, sha256, seed, start_time_of_day_ns, duration_ns, bucket_ns, devices, tick_mode FROM scenario").first else {
            throw ResultsDatabaseError.notResults(database.path)
        }
        let scenario = ScenarioRow(
            name: s[0].text ?? "", text: s[1].text ?? "", sha256: s[2].text ?? "",
            seed: UInt64(bitPattern: s[3].integer ?? 0), startTimeOfDay: s[4].integer ?? 0,
            durationNanoseconds: s[5].integer ?? 0, bucketNanoseconds: s[6].integer ?? 0,
            devices: Int(s[7].integer ?? 0), tickMode: s[8].text ?? "")
        var results = RunResults(scenario: scenario)
        results.deviceClasses = try database.query("SELECT id, name, count, first_device, parameters FROM device_class ORDER BY id").map {
            DeviceClassRow(id: Int($0[0].integer ?? 0), name: $0[1].text ?? "", count: Int($0[2].integer ?? 0),
                           firstDevice: Int($0[3].integer ?? 0), parameters: $0[4].text ?? "")
        }
        results.metrics = try database.query("SELECT id, name, labels, kind, unit, precision_bits, description FROM metric ORDER BY id").map {
            MetricDescriptor(id: Int($0[0].integer ?? 0), name: $0[1].text ?? "", labels: $0[2].text ?? "",
                             kind: MetricKind(rawValue: $0[3].text ?? "") ?? .counter, unit: $0[4].text ?? "",
                             precisionBits: $0[5].integer.map { Int($0) }, description: $0[6].text ?? "")
        }
        try database.forEachRow("SELECT metric_id, bucket_start_ns, value FROM series_point ORDER BY metric_id, bucket_start_ns") { points in
            let row = SeriesPointRow(metricID: Int(points.int64(at: 0)), bucketStart: points.int64(at: 1), value: points.double(at: 2))
            results.series[row.metricID, default: []].append(row)
            return true
        }
        try database.forEachRow(
            "SELECT metric_id, window_start_ns, bucket_index, lower_bound, upper_bound, count FROM histogram_bucket ORDER BY metric_id, window_start_ns, bucket_index"
        ) { buckets in
            let row = HistogramBucketRow(
                metricID: Int(buckets.int64(at: 0)), windowStart: buckets.int64(at: 1), bucketIndex: Int(buckets.int64(at: 2)),
                lowerBound: UInt64(bitPattern: buckets.int64(at: 3)), upperBound: UInt64(bitPattern: buckets.int64(at: 4)),
                count: UInt64(bitPattern: buckets.int64(at: 5)))
            results.histogramRows[row.metricID, default: []].append(row)
            return true
        }
        for row in try database.query("SELECT metric_id, value FROM counter_total") {
            results.counterTotals[Int(row[0].integer ?? 0)] = row[1].real ?? 0
        }
        results.events = try database.query("SELECT seq, at_ns, device, kind, detail FROM event_sample ORDER BY seq").map {
            EventSampleRow(seq: $0[0].integer ?? 0, at: $0[1].integer ?? 0, device: $0[2].integer.map { Int($0) },
                           kind: $0[3].text ?? "", detail: $0[4].text ?? "")
        }
        results.thresholds = try database.query(
            "SELECT id, metric, statistic, op, bound, observed, passed, message FROM threshold_result ORDER BY id").map {
            ThresholdResultRow(id: Int($0[0].integer ?? 0), metric: $0[1].text ?? "", statistic: $0[2].text ?? "",
                               op: $0[3].text ?? "", bound: $0[4].real ?? 0, observed: $0[5].real,
                               passed: ($0[6].integer ?? 0) != 0, message: $0[7].text ?? "")
        }
        results.invariants = try database.query("SELECT name, checks, violations, first_violation FROM invariant_result ORDER BY name").map {
            InvariantResultRow(name: $0[0].text ?? "", checks: $0[1].integer ?? 0, violations: $0[2].integer ?? 0, firstViolation: $0[3].text)
        }
        for row in try database.query("SELECT key, value FROM run") {
            if let key = row[0].text, let value = row[1].text { results.runMetadata[key] = value }
        }
        if results.isRunning {
            for metric in results.metrics where metric.kind == .counter && results.counterTotals[metric.id] == nil {
                results.counterTotals[metric.id] = (results.series[metric.id] ?? []).reduce(0) { $0 + $1.value }
            }
        }
        return results
    }
}

extension RunResults {
    /// Every row as one batch, to write the results into a new database (a merge of shards).
    public var batch: ResultsBatch {
        var batch = ResultsBatch()
        batch.scenario = scenario
        batch.deviceClasses = deviceClasses
        batch.metrics = metrics
        batch.seriesPoints = series.keys.sorted().flatMap { series[$0]! }
        batch.histogramBuckets = histogramRows.keys.sorted().flatMap { histogramRows[$0]! }
        batch.counterTotals = counterTotals.keys.sorted().map { ($0, counterTotals[$0]!) }
        batch.events = events
        batch.thresholds = thresholds
        batch.invariants = invariants
        batch.runMetadata = runMetadata.keys.sorted().map { ($0, runMetadata[$0]!) }
        return batch
    }
}
