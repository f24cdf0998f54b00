import LabKernel
import LabStore

/// Agent runtime latency: time to the first chunk of an answer, tool-call round trips,
/// resumes (how long, how much they replayed) and run durations by workflow.
struct AgentLatencyPanel: DashboardPanel {
    let id = "agent-latency"
    let title = "Agent chats: latency and resume"
    let caption = "Input → first chunk of the agent's answer on the phone; tool-call answer → its tool_response; socket open → resume boundary; events a resume replayed; chat start → run complete."
    var wide: Bool { true }

    func body(for results: RunResults, context: DashboardContext) -> String? {
        guard let firstChunk = results.metric(named: "agent.first_chunk") else { return nil }
        var rows: [[String]] = []
        for (name, what) in [("agent.first_chunk", "time to first chunk"), ("agent.tool_response_time", "tool-call response"),
                             ("agent.resume_time", "resume (open → boundary)")] {
            guard let metric = results.metric(named: name) else { continue }
            let h = results.histogram(metric)
            rows.append([what, MetricUnit.decimal(Double(h.totalCount), digits: 0)] + durationPercentiles(h))
        }
        for metric in results.metrics(named: "agent.run_duration") {
            let h = results.histogram(metric)
            guard !h.isEmpty else { continue }
            rows.append(["run duration, \(metric.label("workflow") ?? "")", MetricUnit.decimal(Double(h.totalCount), digits: 0)] + durationPercentiles(h))
        }
        if let replayed = results.metric(named: "agent.resume_replayed") {
            let h = results.histogram(replayed)
            rows.append(["events replayed by a resume", MetricUnit.decimal(Double(h.totalCount), digits: 0)]
                + [50, 90, 99].map { MetricUnit.decimal(Double(h.value(atPercentile: $0)), digits: 0) })
        }
        let lines = [TimeChart.Line(name: "first chunk p50", color: Palette.series[0], points: percentileOverTime(results, firstChunk, 50, context)),
                     TimeChart.Line(name: "first chunk p99", color: Palette.series[1], points: percentileOverTime(results, firstChunk, 99, context))]
        let chart = context.timeChart { MetricUnit.formatDuration($0) }.lines(lines) + HTML.legend(lines.map { ($0.name, $0.color) })
        return HTML.table(headers: ["", "count", "p50", "p90", "p99"], rows: rows, numericColumns: Set(1...4)) + chart
    }
}

/// Agent runtime activity: chats started and completed by workflow, inputs, connected
/// clients, reconnects.
struct AgentActivityPanel: DashboardPanel {
    let id = "agent-activity"
    let title = "Agent chats: activity"
    let caption = "Inputs per bucket and clients connected at each bucket end; chats started and completed by workflow, and socket reconnects."
    var wide: Bool { true }

    func body(for results: RunResults, context: DashboardContext) -> String? {
        guard results.metric(named: "agent.inputs") != nil else { return nil }
        let lines = [
            TimeChart.Line(name: "inputs", color: Palette.series[0], points: atEnds(context, context.values(results, results.metric(named: "agent.inputs")))),
            TimeChart.Line(name: "clients connected", color: Palette.series[2], points: atEnds(context, context.values(results, results.metric(named: "agent.connected"))),
                           dashed: true),
        ]
        let chart = context.timeChart { MetricUnit.decimal($0, digits: 0) }.lines(lines) + HTML.legend(lines.map { ($0.name, $0.color) })
        var rows: [[String]] = []
        for metric in results.metrics(named: "agent.chats") {
            let workflow = metric.label("workflow") ?? ""
            let started = results.total("agent.chats", labels: metric.labels) ?? 0
            let completed = results.total("agent.completed", labels: metric.labels) ?? 0
            rows.append([workflow, MetricUnit.decimal(started, digits: 0), MetricUnit.decimal(completed, digits: 0)])
        }
        let reconnects = MetricUnit.decimal(results.total("agent.reconnects", labels: "") ?? 0, digits: 0)
        return chart + HTML.table(headers: ["workflow", "chats started", "completed"], rows: rows, numericColumns: [1, 2])
            + "<p class=\"caption\">Socket reconnects after a drop: \(reconnects).</p>"
    }
}
