public import LabKernel
public import LabStore

/// What thresholds are checked against: the recorder at the end of a run, or a results
/// database read back (a merge of shards re-evaluates them on the merged data).
public protocol ThresholdSource {
    func metricIDs(named name: String, matching labels: [String: String]) -> [Int]
    func kind(of id: Int) -> MetricKind
    func total(of id: Int) -> Double
    /// A gauge's value at the end of each bucket.
    func series(of id: Int) -> [Double]
    func runHistogram(of id: Int) -> LogLinearHistogram?
}

extension Recorder: ThresholdSource {
    public func metricIDs(named name: String, matching labels: [String: String]) -> [Int] { handles(named: name, matching: labels).map(\.id) }
    public func kind(of id: Int) -> MetricKind { descriptors[id].kind }
    public func total(of id: Int) -> Double { totals[id] }
    public func series(of id: Int) -> [Double] { gaugeSeries[id] }
    public func runHistogram(of id: Int) -> LogLinearHistogram? { runHistograms[id] }
}

extension RunResults: ThresholdSource {
    public func metricIDs(named name: String, matching labels: [String: String]) -> [Int] {
        metrics.filter { d in d.name == name && labels.allSatisfy { d.label($0.key) == $0.value } }.map(\.id)
    }
    public func kind(of id: Int) -> MetricKind { metrics.first { $0.id == id }?.kind ?? .counter }
    public func total(of id: Int) -> Double { counterTotals[id] ?? 0 }
    public func series(of id: Int) -> [Double] { (series[id] ?? []).map(\.value) }
    /// Rebuilt from the stored buckets: percentiles are exact, mean, minimum and maximum
    /// are at bucket resolution.
    public func runHistogram(of id: Int) -> LogLinearHistogram? {
        metrics.first { $0.id == id }.map { histogram($0) }
    }
}

/// Checks a scenario's thresholds against what the recorder holds at the end of a run.
public enum ThresholdEvaluator {
    public static func evaluate(_ thresholds: [Threshold], recorder: some ThresholdSource) -> [ThresholdResultRow] {
        thresholds.enumerated().map { index, threshold in
            let handles = recorder.metricIDs(named: threshold.metric, matching: threshold.labels)
            let entry = MetricCatalog.entry(named: threshold.metric)
            let unit = threshold.per == nil ? entry?.unit ?? .count : entry?.unit.ratioUnit ?? .share
            let format = threshold.per == nil ? unit.format : unit.formatRatio
            let observed: Double?
            var parts = ""
            if let per = threshold.per {
                let whole = recorder.metricIDs(named: per.metric, matching: per.labels)
                let part = observe(.total, handles: handles, recorder: recorder) ?? 0
                let total = observe(.total, handles: whole, recorder: recorder) ?? 0
                observed = total > 0 ? part / total : nil
                let partUnit = entry?.unit ?? .count, wholeUnit = MetricCatalog.entry(named: per.metric)?.unit ?? .count
                parts = unit == .share ? " (\(partUnit.format(part)) of \(wholeUnit.format(total)))"
                                       : " (\(partUnit.format(part)) over \(wholeUnit.format(total)))"
            } else {
                observed = observe(threshold.statistic, handles: handles, recorder: recorder)
            }
            let (op, bound, passed): (String, Double, Bool)
            switch threshold.bound {
            case .atMost(let limit): (op, bound, passed) = ("<=", limit, observed.map { $0 <= limit } ?? false)
            case .atLeast(let limit): (op, bound, passed) = (">=", limit, observed.map { $0 >= limit } ?? false)
            }
            let name = threshold.metric + Threshold.labelText(threshold.labels)
            let statistic = threshold.per.map { "per \($0.metric)\(Threshold.labelText($0.labels))" } ?? threshold.statistic.description
            let subject = threshold.subject
            let message: String
            if let observed {
                message = "\(subject) = \(format(observed))\(parts) \(passed ? "within" : "breaks") \(op) \(format(bound))"
            } else if threshold.per != nil {
                message = "\(subject) has nothing to divide by\(parts), so \(op) \(format(bound)) cannot be shown"
            } else {
                message = "\(subject) has no data, so \(op) \(unit.format(bound)) cannot be shown"
            }
            return ThresholdResultRow(id: index, metric: name, statistic: statistic,
                                      op: op, bound: bound, observed: observed, passed: passed, message: message)
        }
    }

    static func observe(_ statistic: ThresholdStatistic, handles: [Int], recorder: some ThresholdSource) -> Double? {
        guard let first = handles.first else { return nil }
        switch recorder.kind(of: first) {
        case .counter:
            return handles.reduce(0) { $0 + recorder.total(of: $1) }
        case .gauge:
            let series = handles.map { recorder.series(of: $0) }
            let length = series.map(\.count).min() ?? 0
            guard length > 0 else { return nil }
            let summed = (0..<length).map { i in series.reduce(0) { $0 + $1[i] } }
            switch statistic {
            case .max: return summed.max()
            case .min: return summed.min()
            case .last: return summed.last
            case .mean, .percentile, .count, .total: return summed.reduce(0, +) / Double(length)
            }
        case .histogram:
            var merged: LogLinearHistogram?
            for handle in handles {
                guard let h = recorder.runHistogram(of: handle) else { continue }
                if merged == nil { merged = LogLinearHistogram(precisionBits: h.precisionBits) }
                merged!.merge(h)
            }
            guard let histogram = merged, !histogram.isEmpty else { return nil }
            switch statistic {
            case .percentile(let p): return Double(histogram.value(atPercentile: p))
            case .mean: return histogram.mean
            case .max: return Double(histogram.maximum)
            case .min: return Double(histogram.minimum)
            case .count, .total: return Double(histogram.totalCount)
            case .last: return nil
            }
        }
    }
}
