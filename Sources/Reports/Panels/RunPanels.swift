import LabKernel
import LabStore

/// Simulated events per bucket, with the wall-clock pace of the run.
struct ThroughputPanel: DashboardPanel {
    let id = "throughput"
    let title = "Event throughput"
    let caption = "Kernel events per simulated minute; the wall-clock pace is in the summary."

    func body(for results: RunResults, context: DashboardContext) -> String? {
        guard let metric = results.metric(named: "sim.events") else { return nil }
        let values = context.values(results, metric)
        let minutes = Double(context.bucket) / 6e10
        let points = zip(context.bucketStarts, values).map { (t: min($0 + context.bucket, context.duration), value: $1 / minutes) }
        return context.timeChart { MetricUnit.decimal($0, digits: 0) }
            .lines([.init(name: "events per simulated minute", color: Palette.series[0], points: points)])
    }
}

struct ThresholdsPanel: DashboardPanel {
    let id = "thresholds"
    let title = "Thresholds"
    let caption = "Pass/fail bounds from the scenario; any failure makes the run (`fleetlab simulate`, `fleetlab loadtest`) exit with status 3."
    var wide: Bool { true }

    func body(for results: RunResults, context: DashboardContext) -> String? {
        let running = results.isRunning
        guard !results.thresholds.isEmpty else {
            return "<p class=\"caption\">" + (running ? "The run is still going; this scenario sets no thresholds." : "This scenario sets no thresholds.") + "</p>"
        }
        let heading = running ? "<p class=\"caption\">The run is still going: these are the thresholds on the results so far; the verdict is on the whole run, at the end.</p>" : ""
        let (pass, fail) = running ? ("so far", "so far") : ("pass", "fail")
        // Mid-run, a threshold whose metric has no sample yet is not failing, only not yet judged.
        let waiting = { (t: ThresholdResultRow) in running && t.observed == nil }
        let rows = results.thresholds.map { t in
            [waiting(t) ? "– no data yet" : t.passed ? "<span class=\"pass\">✓ \(pass)</span>" : "<span class=\"fail\">✗ \(fail)</span>",
             "<code>\(HTML.escape(t.metric))</code>", HTML.escape(t.statistic), HTML.escape(t.op), HTML.escape(t.message)]
        }
        return heading + HTML.table(headers: ["", "metric", "statistic", "bound", "result"], rows: rows,
                                    rowClasses: results.thresholds.map { $0.passed || waiting($0) ? "" : "bad" })
    }
}

struct InvariantsPanel: DashboardPanel {
    let id = "invariants"
    let title = "Invariants"
    let caption = "Checked during the run; a violation fails the run with its seed."

    func body(for results: RunResults, context: DashboardContext) -> String? {
        guard !results.invariants.isEmpty else { return nil }
        let rows = results.invariants.map { i in
            [i.passed ? "<span class=\"pass\">✓</span>" : "<span class=\"fail\">✗</span>", "<code>\(HTML.escape(i.name))</code>",
             MetricUnit.decimal(Double(i.checks), digits: 0), MetricUnit.decimal(Double(i.violations), digits: 0),
             HTML.escape(i.firstViolation ?? "")]
        }
        return HTML.table(headers: ["", "invariant", "checks", "violations", "first violation"], rows: rows,
                          numericColumns: [2, 3], rowClasses: results.invariants.map { $0.passed ? "" : "bad" })
    }
}

struct PopulationsPanel: DashboardPanel {
    let id = "populations"
    let title = "Device populations"
    let caption = "Each population's resolved profile (presets with the scenario's overrides)."

    func body(for results: RunResults, context: DashboardContext) -> String? {
        guard !results.deviceClasses.isEmpty else { return nil }
        let rows = results.deviceClasses.map { c in
            [HTML.escape(c.name), MetricUnit.decimal(Double(c.count), digits: 0),
             "<details><summary>parameters</summary><pre>\(HTML.escape(c.parameters))</pre></details>"]
        }
        return HTML.table(headers: ["population", "devices", "profile"], rows: rows, numericColumns: [1])
    }
}

struct EventSamplePanel: DashboardPanel {
    let id = "events"
    let title = "Event sample"
    let caption = "A uniform sample of notable events (lifecycle, power, charger, network, faults); the first 300 shown."
    var wide: Bool { true }

    func body(for results: RunResults, context: DashboardContext) -> String? {
        guard !results.events.isEmpty else { return nil }
        let rows = results.events.prefix(300).map { e in
            [context.labeler.label(e.at) + " <span class=\"caption\">+" + TimeLabeler.span(e.at) + "</span>",
             e.device.map { String($0) } ?? "–", HTML.escape(e.kind), HTML.escape(e.detail)]
        }
        return "<details><summary>\(results.events.count) sampled events</summary>"
            + HTML.table(headers: ["time", "device", "kind", "detail"], rows: rows, numericColumns: [1]) + "</details>"
    }
}

struct ScenarioTextPanel: DashboardPanel {
    let id = "scenario"
    let title = "Scenario"
    var wide: Bool { true }

    func body(for results: RunResults, context: DashboardContext) -> String? {
        "<details><summary>\(HTML.escape(results.scenario.name)) · sha256 \(results.scenario.sha256.prefix(12))</summary>"
            + "<pre>\(HTML.escape(results.scenario.text))</pre></details>"
    }
}
