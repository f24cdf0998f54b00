public import LabStore

/// The limits a comparison is judged against.
public struct ComparisonPolicy: Sendable, Equatable {
    /// The largest regression allowed on any judged figure, as a fraction (0.05 = 5 %);
    /// nil judges only the figures `limits` name.
    public var maxRegression: Double? = 0.05
    /// Limits on figures by name; they apply whether or not the figure has a direction.
    public var limits: [MetricLimit] = []
    /// Percentiles resting on fewer samples than this (in either run) are shown, not judged.
    public var minSamples = 100

    public init(maxRegression: Double? = 0.05, limits: [MetricLimit] = [], minSamples: Int = 100) {
        self.maxRegression = maxRegression
        self.limits = limits
        self.minSamples = minSamples
    }
}

/// `NAME=LIMIT` from the command line: `http.latency:p99=10%` limits the p99 of every label
/// set of `http.latency`; `http.latency{stack=sync}=10%` every figure of the sync label
/// sets (labels match when the figure has each one given). LIMIT is a percentage. A figure
/// with a direction may not worsen by more; one without may not move by more either way.
public struct MetricLimit: Sendable, Equatable {
    public var metric: String
    public var labels: [(String, String)]
    public var statistic: String?
    public var limit: Double
    public var text: String

    public static func == (a: MetricLimit, b: MetricLimit) -> Bool { a.text == b.text }

    public init(parsing text: String) throws(MetricLimitError) {
        guard let equals = text.lastIndex(of: "=") else { throw .init(text: text, reason: "expected NAME=LIMIT, like http.latency:p99=10%") }
        var name = String(text[..<equals])
        let limitText = String(text[text.index(after: equals)...])
        guard limitText.hasSuffix("%"), let percent = Double(limitText.dropLast()), percent >= 0, percent.isFinite else {
            throw .init(text: text, reason: "the limit is a percentage like 10%")
        }
        self.text = text
        limit = percent / 100
        statistic = nil
        if let colon = name.lastIndex(of: ":"), !name[colon...].contains("}") {
            statistic = String(name[name.index(after: colon)...])
            name = String(name[..<colon])
        }
        labels = []
        if let open = name.firstIndex(of: "{") {
            guard name.hasSuffix("}") else { throw .init(text: text, reason: "labels are written {key=value,key=value}") }
            for pair in name[name.index(after: open)..<name.index(before: name.endIndex)].split(separator: ",") {
                let parts = pair.split(separator: "=", maxSplits: 1)
                guard parts.count == 2 else { throw .init(text: text, reason: "labels are written {key=value,key=value}") }
                labels.append((String(parts[0]), String(parts[1])))
            }
            name = String(name[..<open])
        }
        guard !name.isEmpty else { throw .init(text: text, reason: "the metric name is missing") }
        metric = name
    }

    func matches(_ figure: ComparedFigure) -> Bool {
        guard figure.metric == metric, statistic == nil || statistic == figure.statistic else { return false }
        return labels.allSatisfy { MetricDescriptor.label($0.0, in: figure.labels) == $0.1 }
    }
}

public struct MetricLimitError: Error, CustomStringConvertible, Equatable {
    public var text: String
    public var reason: String
    public var description: String { "--metric \(text): \(reason)" }
}

/// One reason a comparison failed.
public struct ComparisonBreach: Sendable, Equatable {
    public enum Kind: String, Sendable {
        case regression, limit, threshold, invariant
    }

    public var kind: Kind
    /// The figure, threshold or invariant.
    public var name: String
    public var message: String
}

extension RunComparison {
    /// Every breach, in the order: limits named on the command line, regressions beyond
    /// `maxRegression` (largest first), figures gone, then the candidate's failed thresholds,
    /// the baseline's held thresholds the candidate does not check, and failed invariants.
    ///
    /// A figure the baseline has and the candidate lacks cannot be shown within a limit: it
    /// breaches a `--metric` limit that names it, and `maxRegression` when both runs have
    /// the same scenario (a build that stops syncing records no sync latency, and no figure
    /// of it could get worse). Between different scenarios, figures come and go by design.
    public var breaches: [ComparisonBreach] {
        guard !identical else { return [] }
        var out: [ComparisonBreach] = []
        for limit in policy.limits {
            for figure in figures where limit.matches(figure) {
                if figure.baseline != nil && figure.candidate == nil {
                    out.append(ComparisonBreach(kind: .limit, name: figure.name, message: "\(Self.goneMessage(figure)), past --metric \(limit.text)"))
                    continue
                }
                let moved = figure.better == .neither ? abs(figure.change ?? 0) : figure.regression
                guard moved > limit.limit else { continue }
                out.append(ComparisonBreach(kind: .limit, name: figure.name,
                                            message: "\(figure.name) \(Self.describe(figure)), past --metric \(limit.text)"))
            }
        }
        if let max = policy.maxRegression {
            let limited = Set(out.map(\.name))
            for figure in figures.filter({ $0.judged && $0.regression > max && !limited.contains($0.name) })
                .sorted(by: { ($0.regression, $1.name) > ($1.regression, $0.name) }) {
                out.append(ComparisonBreach(kind: .regression, name: figure.name,
                                            message: "\(figure.name) \(Self.describe(figure)), worse by more than \(Self.percent(max))"))
            }
            for figure in figures where sameScenario && figure.gone && !limited.contains(figure.name) {
                out.append(ComparisonBreach(kind: .regression, name: figure.name, message: Self.goneMessage(figure)))
            }
        }
        for check in thresholds where check.candidatePassed == false {
            out.append(ComparisonBreach(kind: .threshold, name: check.name, message: "threshold failed: \(check.candidateDetail ?? check.name)"))
        }
        // A bound the baseline held that the candidate does not check (taken out of the
        // scenario, loosened, or on a stack the load test did not target) is a bound no
        // longer shown to hold, whatever the scenarios: a gate is not passed by deleting it.
        for check in thresholds where check.baselinePassed == true && check.candidatePassed == nil {
            out.append(ComparisonBreach(kind: .threshold, name: check.name, message: "threshold no longer checked: \(check.name) \(Self.uncheckedDetail)"))
        }
        for check in invariants where check.candidatePassed == false {
            out.append(ComparisonBreach(kind: .invariant, name: check.name, message: "invariant violated: \(check.name) (\(check.candidateDetail ?? ""))"))
        }
        return out
    }

    public var passed: Bool { breaches.isEmpty }

    /// Why a threshold of the baseline's that the candidate lacks fails.
    static let uncheckedDetail = "held in the baseline; the candidate does not check it"

    /// The figures that moved: judged ones first (they decide the verdict), each group by
    /// the size of its relative move, for the summary's and the page's "largest changes".
    public var changes: [ComparedFigure] {
        figures.filter { ($0.change ?? 0) != 0 }.sorted { a, b in
            if a.judged != b.judged { return a.judged }
            let ma = abs(a.change ?? 0), mb = abs(b.change ?? 0)
            return ma != mb ? ma > mb : a.name < b.name
        }
    }

    /// The metrics (with their labels) that only one run has, in name order: what a build
    /// started or stopped recording, which no change of a figure shows.
    public var metricsOnlyIn: (candidate: [String], baseline: [String]) {
        func names(_ pick: (ComparedFigure) -> Bool) -> [String] {
            Array(Set(figures.filter(pick).map { $0.metric + ($0.labels.isEmpty ? "" : "{\($0.labels)}") })).sorted()
        }
        return (names { $0.baseline == nil && $0.candidate != nil }, names { $0.candidate == nil && $0.baseline != nil })
    }

    /// "energy.device_day{…} and 7 more", for a line.
    static func list(_ names: [String]) -> String {
        names.prefix(2).joined(separator: ", ") + (names.count > 2 ? " and \(names.count - 2) more" : "")
    }

    /// "http.latency{stack=sync} p99 was 120ms; the candidate has no such figure".
    static func goneMessage(_ figure: ComparedFigure) -> String {
        "\(figure.name) was \(figure.baseline.map(figure.unit.format) ?? "–"); the candidate has no such figure"
    }

    /// "p99 120ms → 180ms (+50.0 %)".
    static func describe(_ figure: ComparedFigure) -> String {
        let before = figure.baseline.map(figure.unit.format) ?? "–", after = figure.candidate.map(figure.unit.format) ?? "–"
        return "\(before) → \(after) (\(signedPercent(figure.change)))"
    }

    public static func signedPercent(_ change: Double?) -> String {
        guard let change else { return "new or gone" }
        if change.isInfinite { return change > 0 ? "from 0" : "to 0 from below" }
        return (change > 0 ? "+" : change < 0 ? "−" : "±") + MetricUnit.decimal(abs(change) * 100, digits: 1) + " %"
    }

    static func percent(_ fraction: Double) -> String { MetricUnit.decimal(fraction * 100, digits: fraction * 100 == (fraction * 100).rounded() ? 0 : 1) + " %" }
}
