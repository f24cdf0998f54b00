import LabKernel
import LabStore

/// The headline figures of a run as cards.
struct SummaryPanel: DashboardPanel {
    let id = "summary"
    let title = "Summary"
    var wide: Bool { true }

    func body(for results: RunResults, context: DashboardContext) -> String? {
        let s = results.scenario
        let meta = results.runMetadata
        let events = results.total("sim.events") ?? 0
        let executed = results.metrics(named: "ticks").filter { $0.label("mode") == "executed" }
            .reduce(0.0) { $0 + (results.counterTotals[$1.id] ?? 0) }
        let ticks = results.total(allLabelsOf: "ticks")
        var cards: [(String, String, String, String)] = []  // key, value, sub, class
        cards.append(("Devices", MetricUnit.decimal(Double(s.devices), digits: 0),
                      "\(results.deviceClasses.count) population\(results.deviceClasses.count == 1 ? "" : "s")", ""))
        // A load test runs on the wall clock: no simulated events, ticks or invariants.
        let live = meta["mode"] == "loadtest"
        cards.append((live ? "Ran" : "Simulated", TimeLabeler.span(s.durationNanoseconds),
                      "from \(context.labeler.label(0)), buckets of \(TimeLabeler.span(s.bucketNanoseconds))", ""))
        let wall = Double(meta["wall_seconds"] ?? "") ?? 0
        if live {
            // While the run goes on (`--dashboard-port`) the totals are the buckets' so far.
            let running = results.isRunning
            let ok = results.total("loadtest.iterations", labels: "outcome=ok") ?? 0
            let failed = results.total("loadtest.iterations", labels: "outcome=failed") ?? 0
            let dropped = results.total("loadtest.iterations", labels: "outcome=dropped") ?? 0
            // Not one succeeded: the targets refused them all, and the run failed for it.
            let refused = results.nothingSucceeded && !running
            cards.append(("Iterations", MetricUnit.decimal(ok + failed, digits: 0),
                          refused ? "none succeeded: the targets refused every one"
                              : MetricUnit.decimal(failed, digits: 0) + " failed, " + MetricUnit.decimal(dropped, digits: 0) + " dropped" + (running ? " so far" : ""),
                          dropped > 0 || refused ? "bad" : ""))
            let shares = (results.metric(named: "loadtest.generator_cpu").flatMap { results.series[$0.id] } ?? []).map(\.value)
            let cpu = running ? shares.reduce(0, +) / Double(max(1, shares.count)) : Double(meta["generator_cpu_percent"] ?? "") ?? 0
            let busiest = running ? shares.max() ?? 0 : Double(meta["generator_cpu_percent_max"] ?? "") ?? 0
            cards.append(("Generator CPU", MetricUnit.decimal(cpu, digits: 0) + "%",
                          "of all cores; busiest bucket " + MetricUnit.decimal(busiest, digits: 0) + "%", ""))
            if running {
                let judged = results.thresholds.filter { $0.observed != nil }, passing = judged.filter(\.passed).count
                let unjudged = results.thresholds.count - judged.count
                let note = unjudged > 0 ? "\(unjudged) with no data yet; the verdict at the end" : "judged on the whole run at the end"
                cards.append(results.thresholds.isEmpty ? ("Thresholds", "none", "scenario sets none", "")
                    : judged.isEmpty ? ("Thresholds", "no data yet", "judged on the whole run at the end", "")
                    : ("Thresholds", "\(passing)/\(judged.count) so far", note, passing == judged.count ? "ok" : "bad"))
            }
        } else {
            cards.append(("Events", MetricUnit.decimal(events, digits: 0),
                          wall > 0 ? MetricUnit.decimal(events / wall, digits: 0) + " events/s wall" : "", ""))
            cards.append(("Engine ticks", MetricUnit.decimal(ticks, digits: 0),
                          ticks > 0 ? MetricUnit.decimal((ticks - executed) / ticks * 100, digits: 1) + "% fast-forwarded" : "", ""))
        }
        let passed = results.thresholds.filter(\.passed).count
        if !results.isRunning {
            cards.append(("Thresholds", results.thresholds.isEmpty ? "none" : "\(passed)/\(results.thresholds.count) passed",
                          results.thresholds.isEmpty ? "scenario sets none" : "decide the exit code",
                          results.thresholds.isEmpty ? "" : (results.thresholdsPassed ? "ok" : "bad")))
        }
        let held = results.invariants.filter(\.passed).count
        let checks = results.invariants.reduce(Int64(0)) { $0 + $1.checks }
        if !live {
            cards.append(("Invariants", "\(held)/\(results.invariants.count) held",
                          MetricUnit.decimal(Double(checks), digits: 0) + " checks", results.invariantsPassed ? "ok" : "bad"))
        }
        if wall > 0 {
            cards.append(("Wall time", MetricUnit.formatDuration(wall * 1e9), meta["build"] ?? "", ""))
        }
        if let rss = Double(meta["peak_rss_bytes"] ?? ""), s.devices > 0 {
            cards.append(("Peak memory", MetricUnit.decimal(rss / 1_048_576, digits: 1) + " MiB",
                          MetricUnit.decimal(rss / Double(s.devices), digits: 0) + " bytes per device (whole process)", ""))
        }
        if meta["interrupted"] == "true" {
            cards.append(("Interrupted", "yes", "results cover the time simulated before the stop", "bad"))
        }
        return "<div class=\"cards\">" + cards.map { key, value, sub, cls in
            "<div class=\"card \(cls)\"><div class=\"k\">\(HTML.escape(key))</div><div class=\"v\">\(HTML.escape(value))</div>"
                + "<div class=\"s\">\(HTML.escape(sub))</div></div>"
        }.joined() + "</div>"
    }
}
