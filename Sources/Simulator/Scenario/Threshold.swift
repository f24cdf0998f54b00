public import LabKernel
import LabStore

/// A pass/fail bound on a metric that decides the exit code (k6's thresholds).
public struct Threshold: Sendable, Hashable {
    public var metric: String
    /// Only metrics whose labels include these.
    public var labels: [String: String]
    public var statistic: ThresholdStatistic
    public var bound: ThresholdBound
    /// The bound as written in the file, for messages.
    public var boundText: String
    /// A load test stops as soon as the data so far passes this maximum (k6's
    /// `abortOnFail`), after `delayAbortEval` of it; a simulation is judged at its end.
    public var abortOnFail = false
    public var delayAbortEval: TimeSpan = .zero
    /// With `per`, the bound is on a ratio: this metric's total (a histogram's count)
    /// divided by that one's, as k6's rate thresholds (`http_req_failed: rate<0.01`) and
    /// Gatling's `failedRequests.percent` are: failures per request, bytes per sync.
    public var per: ThresholdDenominator?

    public init(metric: String, labels: [String: String], statistic: ThresholdStatistic, bound: ThresholdBound, boundText: String,
                per: ThresholdDenominator? = nil) {
        self.metric = metric
        self.labels = labels
        self.statistic = statistic
        self.bound = bound
        self.boundText = boundText
        self.per = per
    }
}

/// What a ratio threshold divides by: a counter's total or a histogram's count, over the
/// label sets that include `labels`.
public struct ThresholdDenominator: Sendable, Hashable {
    public var metric: String
    public var labels: [String: String]

    public init(metric: String, labels: [String: String]) {
        self.metric = metric
        self.labels = labels
    }
}

public enum ThresholdStatistic: Sendable, Hashable, CustomStringConvertible {
    case percentile(Double)
    case mean, max, min, count, total, last

    public var description: String {
        switch self {
        case .percentile(let p):
            let text = p == p.rounded() ? String(Int(p)) : String(p)
            return "p\(text)"
        case .mean: return "mean"
        case .max: return "max"
        case .min: return "min"
        case .count: return "count"
        case .total: return "total"
        case .last: return "last"
        }
    }
}

public enum ThresholdBound: Sendable, Hashable {
    case atMost(Double)
    case atLeast(Double)
}

extension Threshold: Decodable {
    enum CodingKeys: String, CodingKey, CaseIterable { case metric, labels, percentile, stat, max, min, abortOnFail, delayAbortEval, per }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        metric = try c.decode(String.self, forKey: .metric)
        labels = try c.decodeIfPresent([String: String].self, forKey: .labels) ?? [:]
        guard let entry = MetricCatalog.entry(named: metric) else {
            throw DecodingError.dataCorrupted(.init(
                codingPath: c.codingPath + [CodingKeys.metric],
                debugDescription: "unknown metric '\(metric)'; known metrics: \(MetricCatalog.names.joined(separator: ", "))"))
        }
        if let percentile = try c.decodeIfPresent(Double.self, forKey: .percentile) {
            guard c.contains(.stat) == false else {
                throw DecodingError.dataCorrupted(.init(codingPath: c.codingPath, debugDescription: "give either percentile or stat, not both"))
            }
            guard (0...100).contains(percentile) else {
                throw DecodingError.dataCorrupted(.init(codingPath: c.codingPath + [CodingKeys.percentile],
                                                        debugDescription: "a percentile is between 0 and 100"))
            }
            statistic = .percentile(percentile)
        } else if let stat = try c.decodeIfPresent(String.self, forKey: .stat) {
            let all: [ThresholdStatistic] = [.mean, .max, .min, .count, .total, .last]
            guard let match = all.first(where: { $0.description == stat }) else {
                throw DecodingError.dataCorrupted(.init(codingPath: c.codingPath + [CodingKeys.stat],
                                                        debugDescription: "expected one of: mean, max, min, count, total, last; found '\(stat)'"))
            }
            statistic = match
        } else {
            statistic = entry.defaultStatistic
        }
        per = try Self.denominator(c, numerator: entry, labels: labels)
        if per == nil, let problem = entry.problem(with: statistic) {
            throw DecodingError.dataCorrupted(.init(codingPath: c.codingPath, debugDescription: problem))
        }
        if per != nil {
            guard c.contains(.percentile) == false, c.contains(.stat) == false else {
                throw DecodingError.dataCorrupted(.init(codingPath: c.codingPath + [CodingKeys.per], debugDescription:
                    "a threshold with per divides \(metric)'s \(entry.kind == .histogram ? "count" : "total") by the other's: leave out percentile and stat"))
            }
            statistic = entry.kind == .histogram ? .count : .total
        }
        let maxText = try c.decodeIfPresent(String.self, forKey: .max)
        let minText = try c.decodeIfPresent(String.self, forKey: .min)
        guard (maxText == nil) != (minText == nil), let text = maxText ?? minText else {
            throw DecodingError.dataCorrupted(.init(codingPath: c.codingPath, debugDescription: "a threshold has exactly one of max or min"))
        }
        let boundUnit = per == nil ? entry.unit : entry.unit.ratioUnit
        guard let value = boundUnit.parseBound(text) else {
            throw DecodingError.dataCorrupted(.init(codingPath: c.codingPath + [maxText != nil ? CodingKeys.max : CodingKeys.min],
                                                    debugDescription: "expected \(boundUnit.boundDescription), found '\(text)'"))
        }
        bound = maxText != nil ? .atMost(value) : .atLeast(value)
        boundText = text
        abortOnFail = try c.decodeIfPresent(Bool.self, forKey: .abortOnFail) ?? false
        if abortOnFail && maxText == nil {
            throw DecodingError.dataCorrupted(.init(codingPath: c.codingPath + [CodingKeys.abortOnFail],
                                                    debugDescription: "abortOnFail stops a load test once a max is passed; a min is judged at the end"))
        }
        if let delay = try c.decodeIfPresent(String.self, forKey: .delayAbortEval) {
            guard let span = TimeSpan(delay), span >= .zero, abortOnFail else {
                throw DecodingError.dataCorrupted(.init(codingPath: c.codingPath + [CodingKeys.delayAbortEval],
                                                        debugDescription: "delayAbortEval is a duration (like 10s) for a threshold with abortOnFail: true"))
            }
            delayAbortEval = span
        }
    }
}

extension Threshold {
    /// `per: NAME` divides by NAME over the threshold's own labels; `per: {metric: NAME,
    /// labels: {…}}` over the labels given (none: all of NAME), which a share of one
    /// metric needs (`sync.requests{outcome=timeout}` per all `sync.requests`).
    static func denominator(_ c: KeyedDecodingContainer<CodingKeys>, numerator: MetricCatalog.Entry,
                            labels: [String: String]) throws -> ThresholdDenominator? {
        guard c.contains(.per) else { return nil }
        struct Written: Decodable { var metric: String; var labels: [String: String]? }
        let written: ThresholdDenominator
        let sameLabels: Bool
        if let name = try? c.decode(String.self, forKey: .per) {
            written = ThresholdDenominator(metric: name, labels: labels)
            sameLabels = true
        } else {
            let object = try c.decode(Written.self, forKey: .per)
            written = ThresholdDenominator(metric: object.metric, labels: object.labels ?? [:])
            sameLabels = false
        }
        func fail(_ text: String) -> DecodingError {
            DecodingError.dataCorrupted(.init(codingPath: c.codingPath + [CodingKeys.per], debugDescription: text))
        }
        guard let entry = MetricCatalog.entry(named: written.metric) else {
            throw fail("unknown metric '\(written.metric)'; known metrics: \(MetricCatalog.names.joined(separator: ", "))")
        }
        for (what, kind) in [(numerator.name, numerator.kind), (entry.name, entry.kind)] where kind == .gauge {
            throw fail("per divides a counter's total or a histogram's count; \(what) is a gauge")
        }
        if let missing = written.labels.keys.sorted().first(where: { !entry.labelKeys.contains($0) }) {
            throw fail(sameLabels
                ? "\(entry.name) has no label '\(missing)' to divide by the same labels; give per as {metric: \(entry.name), labels: {…}} with the labels it has (\(entry.labelKeys.isEmpty ? "none" : entry.labelKeys.joined(separator: ", ")))"
                : "\(entry.name) has no label '\(missing)'; its labels: \(entry.labelKeys.isEmpty ? "none" : entry.labelKeys.joined(separator: ", "))")
        }
        if written.metric == numerator.name && written.labels == labels {
            throw fail("\(numerator.name) per itself is always 100%; a share of one metric names the whole in per's labels, like per: {metric: \(numerator.name)}")
        }
        return written
    }
}

extension Threshold {
    /// How messages name it: `p99(http.latency{stack=sync})`, or for a ratio
    /// `http.failures{stack=sync} per http.requests{stack=sync}`.
    public var subject: String {
        let name = metric + Self.labelText(labels)
        guard let per else { return "\(statistic)(\(name))" }
        return "\(name) per \(per.metric)\(Self.labelText(per.labels))"
    }

    /// `{key=value,…}` in key order (a metric's canonical labels), or nothing.
    static func labelText(_ labels: [String: String]) -> String {
        labels.isEmpty ? "" : "{" + MetricDescriptor.canonicalLabels(labels.map { ($0.key, $0.value) }) + "}"
    }
}
