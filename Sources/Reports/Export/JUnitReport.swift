import LabKernel
public import LabStore

/// Checks as JUnit XML, the format every CI server shows as tests: one suite per command,
/// one test case per threshold, invariant or comparison limit. The shape follows the JUnit
/// schema of Apache Ant's XML formatter (`testsuites` › `testsuite` with `package`, `id`,
/// `properties`, `testcase`s, `system-out`, `system-err`), the strictest of the common
/// ones, so Jenkins, GitLab, GitHub test reporters and Buildkite all read it.
public struct JUnitReport: Sendable {
    public struct Case: Sendable, Equatable {
        public var name: String
        /// The group it belongs to: `thresholds`, `invariants`, `limits`.
        public var classname: String
        /// nil when it passed.
        public var failure: String?
        public var failureType = "check"

        public init(name: String, classname: String, failure: String?, failureType: String = "check") {
            self.name = name
            self.classname = classname
            self.failure = failure
            self.failureType = failureType
        }
    }

    public var suite: String
    public var package = "fleetlab"
    public var properties: [(String, String)] = []
    public var cases: [Case] = []
    public var output = ""
    public var seconds = 0.0
    /// ISO 8601 without a zone, as the schema's pattern wants (UTC).
    public var timestamp: String

    public init(suite: String, timestamp: String) {
        self.suite = suite
        self.timestamp = timestamp
    }

    /// A simulate run's thresholds and invariants.
    public static func run(_ results: RunResults, wallSeconds: Double, timestamp: String, summary: String) -> JUnitReport {
        var report = JUnitReport(suite: "fleetlab simulate \(results.scenario.name)", timestamp: timestamp)
        report.seconds = wallSeconds
        report.properties = [("scenario", results.scenario.name), ("seed", String(results.scenario.seed)),
                             ("devices", String(results.scenario.devices)), ("build", results.runMetadata["build"] ?? "")]
        report.cases = results.thresholds.map { t in
            Case(name: results.title(of: t),
                 classname: "thresholds", failure: t.passed ? nil : t.message, failureType: "threshold")
        } + results.invariants.map { i in
            Case(name: i.name, classname: "invariants",
                 failure: i.passed ? nil : "\(i.violations) of \(i.checks) checks violated; first: \(i.firstViolation ?? "")", failureType: "invariant")
        }
        report.output = summary
        return report
    }

    /// A comparison: the identity check when asked for, each limit, and the candidate's
    /// own thresholds and invariants.
    public static func comparison(_ c: RunComparison, expectIdentical: Bool, timestamp: String, summary: String) -> JUnitReport {
        var report = JUnitReport(suite: "fleetlab compare \(c.baseline.scenario)", timestamp: timestamp)
        report.properties = [("baseline", c.baseline.path), ("candidate", c.candidate.path),
                              ("baseline_digest", c.baseline.digest), ("candidate_digest", c.candidate.digest)]
        let breaches = c.breaches
        if expectIdentical {
            report.cases.append(Case(name: "identical to the baseline", classname: "compare",
                                     failure: c.identical ? nil : "the digests differ: behaviour changed (see the comparison)", failureType: "identity"))
        }
        if let max = c.policy.maxRegression {
            let regressions = breaches.filter { $0.kind == .regression }
            report.cases.append(Case(name: "no judged figure worse by more than \(RunComparison.percent(max))", classname: "limits",
                                     failure: regressions.isEmpty ? nil : regressions.map(\.message).joined(separator: "\n"), failureType: "regression"))
        }
        for limit in c.policy.limits {
            let hits = breaches.filter { $0.kind == .limit && $0.message.hasSuffix("--metric \(limit.text)") }
            report.cases.append(Case(name: "--metric \(limit.text)", classname: "limits",
                                     failure: hits.isEmpty ? nil : hits.map(\.message).joined(separator: "\n"), failureType: "limit"))
        }
        for check in c.thresholds where check.candidatePassed != nil || check.baselinePassed == true {
            let failure = check.candidatePassed == nil ? "\(check.name) \(RunComparison.uncheckedDetail)" : check.candidateDetail
            report.cases.append(Case(name: check.name, classname: "thresholds",
                                     failure: check.candidatePassed == true ? nil : failure, failureType: "threshold"))
        }
        for check in c.invariants where check.candidatePassed != nil {
            report.cases.append(Case(name: check.name, classname: "invariants",
                                     failure: check.candidatePassed == true ? nil : check.candidateDetail, failureType: "invariant"))
        }
        report.output = summary
        return report
    }

    public var xml: String {
        let failures = cases.filter { $0.failure != nil }.count
        var out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n"
        out += "  <testsuite package=\"\(Self.escape(package))\" id=\"0\" name=\"\(Self.escape(suite))\" timestamp=\"\(timestamp)\" "
            + "hostname=\"localhost\" tests=\"\(cases.count)\" failures=\"\(failures)\" errors=\"0\" time=\"\(Self.seconds(seconds))\">\n"
        out += "    <properties>\n"
        for (name, value) in properties {
            out += "      <property name=\"\(Self.escape(name))\" value=\"\(Self.escape(value))\"/>\n"
        }
        out += "    </properties>\n"
        for c in cases {
            let open = "    <testcase name=\"\(Self.escape(c.name))\" classname=\"\(Self.escape(package + "." + c.classname))\" time=\"0\""
            if let failure = c.failure {
                let message = failure.split(separator: "\n").first.map(String.init) ?? failure
                out += open + ">\n      <failure message=\"\(Self.escape(message))\" type=\"\(Self.escape(c.failureType))\">\(Self.escape(failure))</failure>\n    </testcase>\n"
            } else {
                out += open + "/>\n"
            }
        }
        out += "    <system-out>\(Self.escape(output))</system-out>\n    <system-err></system-err>\n  </testsuite>\n</testsuites>\n"
        return out
    }

    /// Seconds as an `xs:decimal` with millisecond precision ("12.345").
    static func seconds(_ value: Double) -> String {
        let ms = Int64((max(0, value.isFinite ? value : 0) * 1000).rounded())
        let fraction = String(ms % 1000)
        return "\(ms / 1000)." + String(repeating: "0", count: 3 - fraction.count) + fraction
    }

    /// XML text and attribute escaping: the page's escaping (its `&#39;` is XML too), after
    /// dropping the characters XML 1.0 cannot carry at all.
    static func escape(_ text: String) -> String {
        var kept = String.UnicodeScalarView()
        for scalar in text.unicodeScalars where scalar.value >= 0x20 ? !(0xFFFE...0xFFFF).contains(scalar.value) : "\t\n\r".unicodeScalars.contains(scalar) {
            kept.append(scalar)
        }
        return HTML.escape(String(kept))
    }
}

extension RunResults {
    /// A threshold as people wrote it: "p99(http.latency{stack=sync}) <= 2.00s", or a
    /// ratio's "http.failures{stack=sync} per http.requests{stack=sync} <= 1.00%".
    /// The unit comes from this run's metric, else `other`'s (a run that recorded nothing
    /// of the metric still names its threshold as the other run does).
    public func title(of threshold: ThresholdResultRow, unitsFrom other: RunResults? = nil) -> String {
        let name = threshold.metric.split(separator: "{", maxSplits: 1).first.map(String.init) ?? threshold.metric
        let unit = (metrics(named: name).first ?? other?.metrics(named: name).first).flatMap { MetricUnit(rawValue: $0.unit) } ?? .count
        guard threshold.statistic.hasPrefix("per ") else {
            return "\(threshold.statistic)(\(threshold.metric)) \(threshold.op) \(unit.format(threshold.bound))"
        }
        return "\(threshold.metric) \(threshold.statistic) \(threshold.op) \(unit.ratioUnit.formatRatio(threshold.bound))"
    }
}
