import LabKernel
import LabStore

/// Lifecycle transitions by cause over the run.
struct LifecyclePanel: DashboardPanel {
    let id = "lifecycle"
    let title = "Lifecycle transitions"
    let caption = "App lifecycle changes by cause, over the whole run."

    static let causes: [(cause: String, label: String)] = [
        ("opened", "opened (warm)"), ("relaunched", "relaunched (cold)"), ("left", "left to background"),
        ("user_kill", "swiped away"), ("os_kill", "killed by the OS"), ("battery_died", "battery died"),
        ("booted", "phone booted"), ("fault_kill", "killed by a fault"),
    ]

    func body(for results: RunResults, context: DashboardContext) -> String? {
        guard !results.metrics(named: "lifecycle.transitions").isEmpty else { return nil }
        let hours = Double(context.duration) / 3.6e12
        let devices = Double(max(results.scenario.devices, 1))
        let groups = Self.causes.map { entry in
            BarChart.Group(label: entry.label, bars: [(entry.label, Palette.series[0],
                                                       results.total("lifecycle.transitions", labels: "cause=\(entry.cause)") ?? 0)])
        }
        let total = groups.reduce(0.0) { $0 + $1.bars[0].value }
        return BarChart(format: { MetricUnit.decimal($0, digits: 0) }).stackedRows(groups)
            + "<p class=\"caption\">\(MetricUnit.decimal(total, digits: 0)) transitions, "
            + "\(MetricUnit.decimal(total / devices / max(hours, 1e-9), digits: 2)) per device-hour.</p>"
    }
}

/// Screen session lengths in our app and in others.
struct SessionsPanel: DashboardPanel {
    let id = "sessions"
    let title = "Screen sessions"
    let caption = "How long users look at the screen, in our app and in other apps."

    func body(for results: RunResults, context: DashboardContext) -> String? {
        var rows: [[String]] = []
        for (app, label) in [("ours", "our app"), ("other", "other apps")] {
            guard let metric = results.metric(named: "session.length", labels: "app=\(app)") else { continue }
            let h = results.histogram(metric)
            let count = results.total("sessions", labels: "app=\(app)") ?? Double(h.totalCount)
            let p = { (q: Double) in h.isEmpty ? "–" : MetricUnit.formatDuration(Double(h.value(atPercentile: q))) }
            rows.append([label, MetricUnit.decimal(count, digits: 0), p(50), p(90), p(99),
                         h.isEmpty ? "–" : MetricUnit.formatDuration(Double(h.maximum))])
        }
        guard !rows.isEmpty else { return nil }
        return HTML.table(headers: ["sessions in", "count", "p50", "p90", "p99", "max"], rows: rows, numericColumns: Set(1...5))
    }
}
