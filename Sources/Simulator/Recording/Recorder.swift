public import LabKernel
public import LabStore

/// A registered metric, by dense id.
public struct MetricHandle: Hashable, Sendable {
    public let id: Int
}

/// Collects metrics during a run and hands them out as `ResultsBatch`es per time bucket.
///
/// Counters are summed per bucket, gauges keep the last value set in a bucket, and
/// histograms are log-linear per bucket window (merged for the whole run on read). All
/// storage is arrays indexed by metric id: recording is an index and an add, never a
/// dictionary lookup or an allocation.
public struct Recorder: Sendable {
    public private(set) var descriptors: [MetricDescriptor] = []
    var bucketValues: [Double] = []
    var bucketTouched: [Bool] = []
    public private(set) var totals: [Double] = []
    var windowHistograms: [LogLinearHistogram?] = []
    /// Whole-run histograms, for thresholds and summaries without re-reading the file.
    public private(set) var runHistograms: [LogLinearHistogram?] = []
    /// Histograms observed once for the whole run (per-device figures at the end).
    var runOnlyHistograms: [LogLinearHistogram?] = []
    /// Gauge series kept in memory for threshold statistics.
    public private(set) var gaugeSeries: [[Double]] = []
    var pending = ResultsBatch()
    var unsentDescriptors = 0

    public init() {}

    /// Registers a metric; the catalog entry must exist and the labels must be its keys.
    public mutating func register(_ name: String, labels: [(String, String)] = [], precisionBits: Int = 7) -> MetricHandle {
        guard let entry = MetricCatalog.entry(named: name) else { preconditionFailure("metric \(name) is not in the catalog") }
        precondition(Set(labels.map(\.0)) == Set(entry.labelKeys), "metric \(name) takes labels \(entry.labelKeys)")
        let id = descriptors.count
        descriptors.append(MetricDescriptor(
            id: id, name: name, labels: MetricDescriptor.canonicalLabels(labels), kind: entry.kind,
            unit: entry.unit.rawValue, precisionBits: entry.kind == .histogram ? precisionBits : nil,
            description: entry.description))
        bucketValues.append(0)
        bucketTouched.append(false)
        totals.append(0)
        windowHistograms.append(entry.kind == .histogram ? LogLinearHistogram(precisionBits: precisionBits) : nil)
        runHistograms.append(entry.kind == .histogram ? LogLinearHistogram(precisionBits: precisionBits) : nil)
        gaugeSeries.append([])
        runOnlyHistograms.append(nil)
        return MetricHandle(id: id)
    }

    public mutating func add(_ metric: MetricHandle, _ value: Double = 1) {
        bucketValues[metric.id] += value
        totals[metric.id] += value
    }

    public mutating func set(_ metric: MetricHandle, _ value: Double) {
        bucketValues[metric.id] = value
        bucketTouched[metric.id] = true
    }

    public mutating func observe(_ metric: MetricHandle, _ value: UInt64, count: UInt64 = 1) {
        windowHistograms[metric.id]!.record(value, count: count)
    }

    /// Records into the whole-run histogram only (values known once, at the end).
    public mutating func observeRun(_ metric: MetricHandle, _ value: UInt64) {
        runHistograms[metric.id]!.record(value)
        if runOnlyHistograms[metric.id] == nil {
            runOnlyHistograms[metric.id] = LogLinearHistogram(precisionBits: descriptors[metric.id].precisionBits ?? 7)
        }
        runOnlyHistograms[metric.id]!.record(value)
    }

    /// Closes the bucket that started at `start`: its counters, gauges and histogram
    /// window become rows of the pending batch, and the accumulators reset.
    public mutating func closeBucket(startingAt start: Int64) {
        flushDescriptors()
        for descriptor in descriptors {
            let id = descriptor.id
            switch descriptor.kind {
            case .counter:
                pending.seriesPoints.append(SeriesPointRow(metricID: id, bucketStart: start, value: bucketValues[id]))
                bucketValues[id] = 0
            case .gauge:
                if bucketTouched[id] {
                    pending.seriesPoints.append(SeriesPointRow(metricID: id, bucketStart: start, value: bucketValues[id]))
                    gaugeSeries[id].append(bucketValues[id])
                    totals[id] = bucketValues[id]
                }
                bucketTouched[id] = false
            case .histogram:
                guard let window = windowHistograms[id], !window.isEmpty else { continue }
                appendRows(window, metricID: id, windowStart: start)
                runHistograms[id]!.merge(window)
                windowHistograms[id] = LogLinearHistogram(precisionBits: window.precisionBits)
            }
        }
    }

    /// Moves whole-run histograms and counter totals into the pending batch (at the end).
    public mutating func closeRun() {
        flushDescriptors()
        for (id, histogram) in runOnlyHistograms.enumerated() {
            if let histogram { appendRows(histogram, metricID: id, windowStart: HistogramBucketRow.wholeRun) }
        }
        runOnlyHistograms = runOnlyHistograms.map { _ in nil }
        for descriptor in descriptors where descriptor.kind == .counter {
            pending.counterTotals.append((descriptor.id, totals[descriptor.id]))
        }
    }

    mutating func appendRows(_ histogram: LogLinearHistogram, metricID: Int, windowStart: Int64) {
        for bucket in histogram.nonEmptyBuckets {
            let width = LogLinearHistogram.width(ofBucket: bucket.index, precisionBits: histogram.precisionBits)
            pending.histogramBuckets.append(HistogramBucketRow(
                metricID: metricID, windowStart: windowStart, bucketIndex: bucket.index,
                lowerBound: bucket.lowerBound, upperBound: bucket.lowerBound + width - 1, count: bucket.count))
        }
    }

    mutating func flushDescriptors() {
        if unsentDescriptors < descriptors.count {
            pending.metrics.append(contentsOf: descriptors[unsentDescriptors...])
            unsentDescriptors = descriptors.count
        }
    }

    /// Everything recorded since the last call.
    public mutating func takeBatch() -> ResultsBatch {
        defer { pending = ResultsBatch() }
        return pending
    }

    /// Handles of every registered metric named `name` whose labels include `labels`.
    public func handles(named name: String, matching labels: [String: String] = [:]) -> [MetricHandle] {
        descriptors.filter { d in
            d.name == name && labels.allSatisfy { d.label($0.key) == $0.value }
        }.map { MetricHandle(id: $0.id) }
    }
}
