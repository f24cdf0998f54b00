public import LabStore
import LabKernel

/// A load test's load over time, as Locust's and Gatling's charts of users and requests:
/// iterations a second by outcome, beside what the workload asked for (the arrivals a
/// second of an open model on the same chart; a closed model's phones on one of their
/// own, with the phones in an iteration at each bucket end).
struct LoadPanel: DashboardPanel {
    let id = "load"
    let title = "Load over time"
    let caption = "Iterations a second that ended ok or failed, or were dropped (open model: no idle phone in time), and what the workload asked for: arrivals a second (open), or phones whose turn it was and phones in an iteration (closed)."
    var wide: Bool { true }

    func body(for results: RunResults, context: DashboardContext) -> String? {
        guard results.metric(named: "loadtest.iterations", labels: "outcome=ok") != nil else { return nil }
        let seconds = Double(context.bucket) / 1e9, wall = Double(results.runMetadata["wall_seconds"] ?? "") ?? 0
        let perSecond = { (name: String, labels: String) in
            atEnds(context, Self.perSecond(context.values(results, results.metric(named: name, labels: labels)), bucketSeconds: seconds, wallSeconds: wall))
        }
        var rates = [("ok", Palette.series[0]), ("failed", Palette.series[3]), ("dropped", Palette.series[1])].map { outcome, color in
            TimeChart.Line(name: "\(outcome) a second", color: color, points: perSecond("loadtest.iterations", "outcome=\(outcome)"))
        }
        if let scheduled = results.metric(named: "loadtest.arrival_rate") {
            rates.append(TimeChart.Line(name: "arrivals a second scheduled", color: Palette.series[7],
                                        points: atEnds(context, context.values(results, scheduled)), dashed: true))
        }
        let format = { (v: Double) in MetricUnit.decimal(v, digits: v < 10 && v != v.rounded() ? 1 : 0) }
        var html = context.timeChart(format: format).lines(rates) + HTML.legend(rates.map { ($0.name, $0.color) })
        if let phones = results.metric(named: "loadtest.phones") {
            let lines = [TimeChart.Line(name: "phones whose turn it is", color: Palette.series[4], points: atEnds(context, context.values(results, phones))),
                         TimeChart.Line(name: "phones in an iteration", color: Palette.series[5],
                                        points: atEnds(context, context.values(results, results.metric(named: "loadtest.busy_devices"))), dashed: true)]
            html += context.timeChart(format: format).lines(lines) + HTML.legend(lines.map { ($0.name, $0.color) })
        }
        return html
    }

    /// Counts per bucket as rates a second. The last bucket stays open until the iterations
    /// in flight at the end have ended, so it spans from its start to the run's end
    /// (`wallSeconds`), often longer than a bucket: its rate is over that span, else every
    /// phone finishing its last iteration there reads as a spike.
    static func perSecond(_ counts: [Double], bucketSeconds: Double, wallSeconds: Double) -> [Double] {
        let lastSpan = max(bucketSeconds, wallSeconds - Double(max(0, counts.count - 1)) * bucketSeconds)
        return counts.enumerated().map { index, count in count / (index == counts.count - 1 ? lastSpan : bucketSeconds) }
    }
}
