import LabKernel
public import LabStore

/// Checks a scenario's thresholds against what the recorder holds at the end of a run.
public enum ThresholdEvaluator {
    public static func evaluate(_ thresholds: [Threshold], recorder: Recorder) -> [ThresholdResultRow] {
        thresholds.enumerated().map { index, threshold in
            let handles = recorder.handles(named: threshold.metric, matching: threshold.labels)
            let unit = MetricCatalog.entry(named: threshold.metric)?.unit ?? .count
            let observed = observe(threshold.statistic, handles: handles, recorder: recorder)
            let (op, bound, passed): (String, Double, Bool)
            switch threshold.bound {
            case .atMost(let limit): (op, bound, passed) = ("<=", limit, observed.map { $0 <= limit } ?? false)
            case .atLeast(let limit): (op, bound, passed) = (">=", limit, observed.map { $0 >= limit } ?? false)
            }
            let labelText = threshold.labels.isEmpty ? ""
                : "{" + threshold.labels.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ",") + "}"
            let subject = "\(threshold.statistic)(\(threshold.metric)\(labelText))"
            let message: String
            if let observed {
                message = "\(subject) = \(unit.format(observed)) \(passed ? "within" : "breaks") \(op) \(unit.format(bound))"
            } else {
                message = "\(subject) has no data, so \(op) \(unit.format(bound)) cannot be shown"
            }
            return ThresholdResultRow(id: index, metric: threshold.metric + labelText, statistic: threshold.statistic.description,
                                      op: op, bound: bound, observed: observed, passed: passed, message: message)
        }
    }

    static func observe(_ statistic: ThresholdStatistic, handles: [MetricHandle], recorder: Recorder) -> Double? {
        guard let first = handles.first else { return nil }
        switch recorder.descriptors[first.id].kind {
        case .counter:
            return handles.reduce(0) { $0 + recorder.totals[$1.id] }
        case .gauge:
            let series = handles.map { recorder.gaugeSeries[$0.id] }
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
                guard let h = recorder.runHistograms[handle.id] else { continue }
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
