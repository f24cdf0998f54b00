/// Rows of the results database as plain values. The recorder fills `ResultsBatch`es on
/// the simulation thread and hands them to a writer; nothing here touches SQLite.

public enum MetricKind: String, Sendable, Hashable {
    /// Summed per time bucket (events, ticks, transitions).
    case counter
    /// Sampled at the end of each time bucket (devices per power state, queue length).
    case gauge
    /// A log-linear histogram per time window.
    case histogram
}

/// A metric's identity and meaning. Ids are assigned in registration order, which is
/// deterministic, so the same metric has the same id in every run of a scenario.
public struct MetricDescriptor: Hashable, Sendable {
    public var id: Int
    public var name: String
    /// Canonical "key=value,key=value" with keys sorted; empty when unlabelled.
    public var labels: String
    public var kind: MetricKind
    public var unit: String
    public var precisionBits: Int?
    public var description: String

    public init(id: Int, name: String, labels: String, kind: MetricKind, unit: String, precisionBits: Int? = nil, description: String) {
        self.id = id
        self.name = name
        self.labels = labels
        self.kind = kind
        self.unit = unit
        self.precisionBits = precisionBits
        self.description = description
    }

    /// Labels as a dictionary-free list of pairs, in canonical order.
    public var labelPairs: [(key: String, value: String)] { Self.labelPairs(of: labels) }

    public func label(_ key: String) -> String? { Self.label(key, in: labels) }

    /// The pairs of a label text (`key=value,key=value`).
    public static func labelPairs(of labels: String) -> [(key: String, value: String)] {
        labels.split(separator: ",").compactMap { pair in
            let parts = pair.split(separator: "=", maxSplits: 1)
            return parts.count == 2 ? (String(parts[0]), String(parts[1])) : nil
        }
    }

    /// One label's value in a label text.
    public static func label(_ key: String, in labels: String) -> String? { labelPairs(of: labels).first { $0.key == key }?.value }

    /// Builds the canonical label string from pairs in any order.
    public static func canonicalLabels(_ pairs: [(String, String)]) -> String {
        pairs.sorted { $0.0 < $1.0 }.map { "\($0.0)=\($0.1)" }.joined(separator: ",")
    }
}

public struct ScenarioRow: Sendable, Equatable {
    public var name: String
    public var text: String
    public var sha256: String
    public var seed: UInt64
    /// Time of day at the run's origin (series times are offsets from the origin).
    public var startTimeOfDay: Int64
    public var durationNanoseconds: Int64
    public var bucketNanoseconds: Int64
    public var devices: Int
    public var tickMode: String

    public init(name: String, text: String, sha256: String, seed: UInt64, startTimeOfDay: Int64, durationNanoseconds: Int64, bucketNanoseconds: Int64, devices: Int, tickMode: String) {
        self.name = name
        self.text = text
        self.sha256 = sha256
        self.seed = seed
        self.startTimeOfDay = startTimeOfDay
        self.durationNanoseconds = durationNanoseconds
        self.bucketNanoseconds = bucketNanoseconds
        self.devices = devices
        self.tickMode = tickMode
    }
}

public struct DeviceClassRow: Sendable, Equatable {
    public var id: Int
    public var name: String
    public var count: Int
    public var firstDevice: Int
    /// The resolved profile parameters as canonical JSON.
    public var parameters: String

    public init(id: Int, name: String, count: Int, firstDevice: Int, parameters: String) {
        self.id = id
        self.name = name
        self.count = count
        self.firstDevice = firstDevice
        self.parameters = parameters
    }
}

public struct SeriesPointRow: Sendable, Equatable {
    public var metricID: Int
    public var bucketStart: Int64
    public var value: Double
    public init(metricID: Int, bucketStart: Int64, value: Double) {
        self.metricID = metricID
        self.bucketStart = bucketStart
        self.value = value
    }
}

public struct HistogramBucketRow: Sendable, Equatable {
    /// Window start in ns, or `wholeRun` for a histogram recorded once per run.
    public var metricID: Int
    public var windowStart: Int64
    public var bucketIndex: Int
    public var lowerBound: UInt64
    public var upperBound: UInt64
    public var count: UInt64

    public static let wholeRun: Int64 = -1

    public init(metricID: Int, windowStart: Int64, bucketIndex: Int, lowerBound: UInt64, upperBound: UInt64, count: UInt64) {
        self.metricID = metricID
        self.windowStart = windowStart
        self.bucketIndex = bucketIndex
        self.lowerBound = lowerBound
        self.upperBound = upperBound
        self.count = count
    }
}

public struct EventSampleRow: Sendable, Equatable {
    public var seq: Int64
    public var at: Int64
    public var device: Int?
    public var kind: String
    public var detail: String
    public init(seq: Int64, at: Int64, device: Int?, kind: String, detail: String) {
        self.seq = seq
        self.at = at
        self.device = device
        self.kind = kind
        self.detail = detail
    }
}

public struct ThresholdResultRow: Sendable, Equatable {
    public var id: Int
    public var metric: String
    /// "p99", "mean", "max", "total" ...; a ratio's "per http.requests{stack=sync}".
    public var statistic: String
    /// "<=" or ">=".
    public var op: String
    public var bound: Double
    public var observed: Double?
    public var passed: Bool
    public var message: String

    public init(id: Int, metric: String, statistic: String, op: String, bound: Double, observed: Double?, passed: Bool, message: String) {
        self.id = id
        self.metric = metric
        self.statistic = statistic
        self.op = op
        self.bound = bound
        self.observed = observed
        self.passed = passed
        self.message = message
    }
}

public struct InvariantResultRow: Sendable, Equatable {
    public var name: String
    public var checks: Int64
    public var violations: Int64
    public var firstViolation: String?
    public var passed: Bool { violations == 0 }

    public init(name: String, checks: Int64, violations: Int64, firstViolation: String?) {
        self.name = name
        self.checks = checks
        self.violations = violations
        self.firstViolation = firstViolation
    }
}

/// A unit of work for the writer: everything recorded since the last hand-off.
public struct ResultsBatch: Sendable {
    public var scenario: ScenarioRow?
    public var deviceClasses: [DeviceClassRow] = []
    public var metrics: [MetricDescriptor] = []
    public var seriesPoints: [SeriesPointRow] = []
    public var histogramBuckets: [HistogramBucketRow] = []
    public var counterTotals: [(metricID: Int, value: Double)] = []
    public var events: [EventSampleRow] = []
    public var thresholds: [ThresholdResultRow] = []
    public var invariants: [InvariantResultRow] = []
    public var runMetadata: [(key: String, value: String)] = []

    public init() {}

    public var isEmpty: Bool {
        scenario == nil && deviceClasses.isEmpty && metrics.isEmpty && seriesPoints.isEmpty
            && histogramBuckets.isEmpty && counterTotals.isEmpty && events.isEmpty
            && thresholds.isEmpty && invariants.isEmpty && runMetadata.isEmpty
    }

    public var rowCount: Int {
        (scenario == nil ? 0 : 1) + deviceClasses.count + metrics.count + seriesPoints.count + histogramBuckets.count
            + counterTotals.count + events.count + thresholds.count + invariants.count + runMetadata.count
    }
}
