import LabStore

extension RunComparison {
    /// The one-screen terminal summary: the two runs, the verdict, the five largest changes,
    /// thresholds and invariants that changed, and what failed.
    public func summary(htmlPath: String?) -> String {
        var lines: [String] = []
        func row(_ key: String, _ value: String) { lines.append("  " + key + String(repeating: " ", count: max(1, 12 - key.count)) + value) }
        func describe(_ side: Side) -> String {
            "\(side.scenario), seed \(side.seed), \(MetricUnit.decimal(Double(side.devices), digits: 0)) devices, "
                + "\(MetricUnit.formatDuration(Double(side.durationNanoseconds))), \(side.build)  (\(side.path))"
        }
        let verdict = identical ? "IDENTICAL" : (passed ? "PASSED" : "FAILED")
        lines.append("fleetlab compare — \(verdict)")
        lines.append("")
        row("baseline", describe(baseline))
        row("candidate", describe(candidate))
        if identical {
            row("digest", "\(baseline.digest.prefix(16)) in both: the runs are identical, row for row")
            return lines.joined(separator: "\n")
        }
        if !sameScenario { row("scenario", "the scenarios differ (figures are matched by metric name and labels)") }
        let judged = figures.filter(\.judged)
        let onlyIn = metricsOnlyIn
        let oneSided = figures.filter { $0.change == nil }.count
        row("figures", "\(figures.count) compared, \(judged.count) judged; \(judged.filter { $0.regression > 0 }.count) worse, "
            + "\(judged.filter(\.improved).count) better, \(figures.filter { $0.change == 0 }.count) unchanged"
            + (oneSided > 0 ? ", \(oneSided) in one run only" : ""))
        if !onlyIn.candidate.isEmpty { row("new", "\(onlyIn.candidate.count) metrics: \(Self.list(onlyIn.candidate))") }
        if !onlyIn.baseline.isEmpty { row("gone", "\(onlyIn.baseline.count) metrics: \(Self.list(onlyIn.baseline))") }
        let largest = changes.prefix(5)
        if largest.isEmpty {
            row("changes", oneSided > 0 ? "none of the figures both runs have moved"
                : "none: every figure is equal (the runs differ elsewhere, e.g. event samples)")
        } else {
            row("largest", "changes (of \(changes.count))")
            let width = largest.map(\.name.count).max() ?? 0
            for figure in largest {
                let mark = figure.regression > 0 ? "▲ worse" : figure.improved ? "▼ better" : "  "
                lines.append("      " + figure.name + String(repeating: " ", count: width - figure.name.count + 2)
                    + Self.describe(figure) + "  " + mark)
            }
        }
        let movedChecks = (thresholds + invariants).filter { $0.baselinePassed != $0.candidatePassed }
        for check in movedChecks {
            row("check", "\(check.name): \(Self.state(check.baselinePassed)) → \(Self.state(check.candidatePassed))")
        }
        let breaches = breaches
        if breaches.isEmpty {
            row("verdict", "within limits" + (policy.maxRegression.map { " (no judged figure worse by more than \(Self.percent($0)))" } ?? ""))
        } else {
            row("verdict", "\(breaches.count) past a limit")
            for breach in breaches.prefix(10) { lines.append("      ✗ \(breach.message)") }
            if breaches.count > 10 { lines.append("      … and \(breaches.count - 10) more (see the page)") }
        }
        if let htmlPath { row("page", htmlPath) }
        return lines.joined(separator: "\n")
    }

    static func state(_ passed: Bool?) -> String {
        passed.map { $0 ? "passed" : "failed" } ?? "absent"
    }
}
