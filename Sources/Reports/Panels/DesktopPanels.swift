import LabKernel
import LabStore

/// Desktop bridge turns: how fast the desktop's answer reaches the phone that asked, how
/// turns ended, and what reconnecting costs.
struct DesktopTurnsPanel: DashboardPanel {
    let id = "desktop-turns"
    let title = "Desktop bridge: prompts, first chunk and rebuilds"
    let caption = "From a phone's prompt to the first chunk of the desktop's answer on it, and to the turn's end; prompts by outcome; from a phone's dial to its timeline rebuilt from the desktop's history, with the reconnects and give-ups behind it."
    var wide: Bool { true }

    func body(for results: RunResults, context: DashboardContext) -> String? {
        guard results.metric(named: "desktop.first_chunk") != nil else { return nil }
        var rows: [[String]] = []
        for (name, what) in [("desktop.first_chunk", "prompt to first chunk"), ("desktop.turn_time", "prompt to turn end"),
                             ("desktop.rebuild_time", "dial to timeline rebuilt")] {
            guard let metric = results.metric(named: name) else { continue }
            let h = results.histogram(metric)
            rows.append([what, MetricUnit.decimal(Double(h.totalCount), digits: 0)] + durationPercentiles(h))
        }
        let total = { (name: String, labels: String) in MetricUnit.decimal(results.total(name, labels: labels) ?? 0, digits: 0) }
        let outcomes = ["ok", "cancelled", "failed", "not_connected"].map { "\($0) \(total("desktop.prompts", "outcome=\($0)"))" }
        return HTML.table(headers: ["", "count", "p50", "p90", "p99"], rows: rows, numericColumns: Set(1...4))
            + "<p class=\"caption\">Prompts: \(outcomes.joined(separator: ", ")). Reconnects: \(total("desktop.reconnects", "")); "
            + "timelines rebuilt: \(total("desktop.rebuilds", "")); phones that gave up dialling: \(total("desktop.gave_up", "")).</p>"
    }
}

/// Answer chunks per second reaching phones, and below it the phones connected and
/// desktops awake (two charts: chunks per second and device counts differ by orders of
/// magnitude, and one scale would flatten the chunks).
struct DesktopActivityPanel: DashboardPanel {
    let id = "desktop-activity"
    let title = "Desktop bridge: chunks per second"
    let caption = "Answer chunks applied to phones' timelines per second (every mirroring phone counts); below, at each bucket end, the phones connected to their desktop and the desktops awake."
    var wide: Bool { true }

    func body(for results: RunResults, context: DashboardContext) -> String? {
        guard let chunks = results.metric(named: "desktop.chunks") else { return nil }
        let seconds = Double(context.bucket) / 1e9
        let rate = [TimeChart.Line(name: "chunks per second", color: Palette.series[0], points: atEnds(context, context.values(results, chunks).map { $0 / seconds }))]
        let counts = [
            TimeChart.Line(name: "phones connected", color: Palette.series[2], points: atEnds(context, context.values(results, results.metric(named: "desktop.phones_connected")))),
            TimeChart.Line(name: "desktops awake", color: Palette.series[4], points: atEnds(context, context.values(results, results.metric(named: "desktop.desktops_awake"))),
                           dashed: true),
        ]
        return context.timeChart { MetricUnit.decimal($0, digits: 2) }.lines(rate) + HTML.legend(rate.map { ($0.name, $0.color) })
            + context.timeChart { MetricUnit.decimal($0, digits: 0) }.lines(counts) + HTML.legend(counts.map { ($0.name, $0.color) })
    }
}
