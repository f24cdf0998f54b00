import LabKernel
import LabStore

/// The page of `fleetlab compare`: the verdict first, then the largest changes, latency
/// distributions of both runs overlaid, thresholds and invariants side by side, and every
/// figure. Self-contained like the dashboard (inline CSS and SVG, no script), so a CI job
/// can publish it as an artefact.
public enum ComparisonPage {
    static let baselineColor = "#8a8a96"
    static let candidateColor = "#3b7dd8"
    /// Distributions drawn, the most changed first.
    static let maxDistributions = 8

    public static func render(_ comparison: RunComparison) -> String {
        var sections = ""
        func section(_ title: String, _ caption: String, _ body: String, wide: Bool = true, id: String = "") {
            sections += "<section class=\"panel\(wide ? " wide" : "")\"\(id.isEmpty ? "" : " id=\"\(id)\"")><h2>\(HTML.escape(title))</h2>"
                + (caption.isEmpty ? "" : "<p class=\"caption\">\(HTML.escape(caption))</p>") + "\(body)</section>\n"
        }
        section("Verdict", "", verdict(comparison), id: "verdict")
        let sides = [comparison.baseline, comparison.candidate]
        section("The runs", comparison.sameScenario || comparison.identical ? "" : "The scenarios differ; figures are matched by metric name and labels.",
                HTML.table(headers: ["", "scenario", "seed", "devices", "simulated", "build", "digest", "results"],
                           rows: zip(["baseline", "candidate"], sides).map { name, side in
                               [name, HTML.escape(side.scenario), String(side.seed), MetricUnit.decimal(Double(side.devices), digits: 0),
                                MetricUnit.formatDuration(Double(side.durationNanoseconds)), HTML.escape(side.build),
                                "<code>\(side.digest.prefix(16))</code>", "<code>\(HTML.escape(side.path))</code>"]
                           }, numericColumns: [2, 3]))
        if !comparison.identical {
            let changes = comparison.changes
            section("Largest changes", "\(changes.count) of \(comparison.figures.count) figures moved, judged ones first; red is worse, green better, white has no direction. The limit is \(comparison.policy.maxRegression.map(RunComparison.percent) ?? "off").",
                    (changes.isEmpty ? "<p>No figure moved.</p>" : figureTable(Array(changes.prefix(15)))) + onlyInOneRun(comparison), id: "changes")
            // Distributions with enough samples to judge first, the most changed p99 first.
            let floor = UInt64(comparison.policy.minSamples)
            let drawn = comparison.distributions.sorted { a, b in
                let fa = min(a.baseline.totalCount, a.candidate.totalCount) >= floor, fb = min(b.baseline.totalCount, b.candidate.totalCount) >= floor
                if fa != fb { return fa }
                let ca = p99Change(a), cb = p99Change(b)
                return ca != cb ? ca > cb : a.name < b.name
            }.prefix(maxDistributions)
            for distribution in drawn {
                let lines = [PercentileChart.Line(name: "baseline", color: baselineColor, histogram: distribution.baseline, dashed: true),
                             PercentileChart.Line(name: "candidate", color: candidateColor, histogram: distribution.candidate)]
                let p99 = "p99 \(MetricUnit.formatDuration(Double(distribution.baseline.value(atPercentile: 99)))) → "
                    + "\(MetricUnit.formatDuration(Double(distribution.candidate.value(atPercentile: 99))))"
                section(distribution.name, "\(p99); \(MetricUnit.decimal(Double(distribution.baseline.totalCount), digits: 0)) → \(MetricUnit.decimal(Double(distribution.candidate.totalCount), digits: 0)) samples.",
                        PercentileChart().render(lines) + HTML.legend(lines.map { ($0.name, $0.color) }), wide: false)
            }
            let checks = comparison.thresholds.map { ("threshold", $0) } + comparison.invariants.map { ("invariant", $0) }
            if !checks.isEmpty {
                section("Thresholds and invariants", "Each run's own checks; a candidate that fails one fails the comparison.",
                        HTML.table(headers: ["", "check", "baseline", "candidate"],
                                   rows: checks.map { kind, check in [kind, HTML.escape(check.name), mark(check.baselinePassed, check.baselineDetail), mark(check.candidatePassed, check.candidateDetail)] },
                                   rowClasses: checks.map { $0.1.candidatePassed == false ? "bad" : "" }))
            }
            section("Every figure", "Percentiles of histograms, totals of counters, mean and maximum of gauges.",
                    "<details><summary>\(comparison.figures.count) figures</summary>\(figureTable(comparison.figures))</details>")
        }
        let title = "fleetlab compare: \(comparison.baseline.scenario)" + (comparison.baseline.scenario == comparison.candidate.scenario ? "" : " → \(comparison.candidate.scenario)")
        return """
        <!DOCTYPE html>
        <html lang="en"><head><meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>\(HTML.escape(title))</title>
        <style>\(Dashboard.stylesheet)\(stylesheet)</style></head>
        <body><header><h1>\(HTML.escape(title))</h1><p>\(HTML.escape(subtitle(comparison)))</p></header>
        <main>
        \(sections)</main>
        <footer>Generated by fleetlab compare from two results databases; runs are deterministic, so every difference here is real.</footer>
        </body></html>
        """
    }

    static let stylesheet = """
    tr.good td{background:#eef8f1}.verdict{font-size:26px;font-weight:700;margin:2px 0 6px}
    .verdict.pass{color:var(--ok)}.verdict.fail{color:var(--bad)}.verdict.same{color:var(--ink)}
    .worse{color:var(--bad);font-weight:600}.better{color:var(--ok);font-weight:600}
    """

    static func subtitle(_ c: RunComparison) -> String {
        "baseline \(c.baseline.build) · candidate \(c.candidate.build) · "
            + (c.identical ? "identical digests" : "\(c.figures.filter(\.judged).count) figures judged")
    }

    static func verdict(_ c: RunComparison) -> String {
        if c.identical {
            return "<div class=\"verdict same\">Identical</div><p>Both runs have digest <code>\(c.baseline.digest)</code>: every deterministic table matches row for row.</p>"
        }
        let breaches = c.breaches
        if breaches.isEmpty {
            return "<div class=\"verdict pass\">Passed</div><p>No judged figure is worse by more than the limit, and the candidate's thresholds and invariants hold.</p>"
        }
        return "<div class=\"verdict fail\">Failed: \(breaches.count) past a limit</div><ul>"
            + breaches.map { "<li>\(HTML.escape($0.message))</li>" }.joined() + "</ul>"
    }

    /// The metrics only one run recorded, named (a build that adds or drops a metric moves
    /// no figure both runs have).
    static func onlyInOneRun(_ comparison: RunComparison) -> String {
        let (new, gone) = comparison.metricsOnlyIn
        func line(_ what: String, _ names: [String]) -> String {
            names.isEmpty ? "" : "<p>\(what) (\(names.count)): " + names.map { "<code>\(HTML.escape($0))</code>" }.joined(separator: ", ") + "</p>"
        }
        return line("Only the candidate has", new) + line("Only the baseline has", gone)
    }

    static func figureTable(_ figures: [ComparedFigure]) -> String {
        HTML.table(headers: ["metric", "statistic", "baseline", "candidate", "change", "better"],
                   rows: figures.map { f in
                       let cls = f.regression > 0 ? "worse" : f.improved ? "better" : ""
                       return ["<code>\(HTML.escape(f.metric + (f.labels.isEmpty ? "" : "{\(f.labels)}")))</code>", f.statistic,
                               f.baseline.map(f.unit.format) ?? "–", f.candidate.map(f.unit.format) ?? "–",
                               "<span class=\"\(cls)\">\(HTML.escape(RunComparison.signedPercent(f.change)))</span>",
                               f.better.rawValue + (f.judged || f.better == .neither ? "" : f.statistic == "max" ? " (a maximum: shown, not judged)" : " (few samples: not judged)")]
                   },
                   numericColumns: [2, 3, 4],
                   rowClasses: figures.map { $0.regression > 0 ? "bad" : $0.improved ? "good" : "" })
    }

    static func mark(_ passed: Bool?, _ detail: String?) -> String {
        guard let passed else { return "–" }
        return (passed ? "<span class=\"pass\">passed</span>" : "<span class=\"fail\">failed</span>") + " " + HTML.escape(detail ?? "")
    }

    static func p99Change(_ d: ComparedDistribution) -> Double {
        let before = Double(d.baseline.value(atPercentile: 99)), after = Double(d.candidate.value(atPercentile: 99))
        return before == 0 ? (after == 0 ? 0 : .infinity) : abs(after - before) / before
    }
}
