import LabKernel
import LabStore

/// Duration percentiles of a histogram as table cells ("–" when it is empty).
func durationPercentiles(_ h: LogLinearHistogram, _ qs: [Double] = [50, 90, 99]) -> [String] {
    qs.map { h.isEmpty ? "–" : MetricUnit.formatDuration(Double(h.value(atPercentile: $0))) }
}

/// Points at bucket ends.
func atEnds(_ context: DashboardContext, _ values: [Double]) -> [(t: Int64, value: Double)] {
    zip(context.bucketStarts, values).map { (t: min($0 + context.bucket, context.duration), value: $1) }
}

/// A histogram's percentile `q` in each bucket that has observations, at the bucket's end.
func percentileOverTime(_ results: RunResults, _ metric: MetricDescriptor, _ q: Double, _ context: DashboardContext) -> [(t: Int64, value: Double)] {
    context.bucketStarts.compactMap { start in
        let h = results.histogram(metric, window: start)
        return h.isEmpty ? nil : (min(start + context.bucket, context.duration), Double(h.value(atPercentile: q)))
    }
}
