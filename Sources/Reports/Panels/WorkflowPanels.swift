import LabKernel
import LabStore

/// The sequences of a run in the order their metrics were registered (workload order).
private func sequences(_ results: RunResults) -> [String] {
    var seen: Set<String> = []
    return results.metrics(named: "workflow.started").compactMap { $0.label("sequence") }.filter { seen.insert($0).inserted }
}

/// p50, p90, p99 and the maximum.
private func percentiles(_ h: LogLinearHistogram) -> [String] {
    durationPercentiles(h) + [h.isEmpty ? "–" : MetricUnit.formatDuration(Double(h.maximum))]
}

/// Instances per sequence: how many started, how they ended, how long they took.
struct WorkflowsPanel: DashboardPanel {
    let id = "workflows"
    let title = "Workflows"
    let caption = "Instances per sequence by outcome; durations are from start to completion, waits for people included."
    var wide: Bool { true }

    func body(for results: RunResults, context: DashboardContext) -> String? {
        let names = sequences(results)
        guard !names.isEmpty else { return nil }
        let rows: [[String]] = names.map { name in
            let count = { (metric: String, labels: String) in results.total(metric, labels: labels) ?? 0 }
            let started = count("workflow.started", "sequence=\(name)")
            let completed = count("workflow.finished", "outcome=completed,sequence=\(name)")
            let failed = count("workflow.finished", "outcome=failed,sequence=\(name)")
            let cancelled = count("workflow.finished", "outcome=cancelled,sequence=\(name)")
            let ended = completed + failed + cancelled
            let duration = results.metric(named: "workflow.duration", labels: "outcome=completed,sequence=\(name)").map(results.histogram)
                ?? LogLinearHistogram(precisionBits: 7)
            return ["<code>\(HTML.escape(name))</code>", MetricUnit.decimal(started, digits: 0), MetricUnit.decimal(completed, digits: 0),
                    MetricUnit.decimal(failed, digits: 0), MetricUnit.decimal(cancelled, digits: 0),
                    ended > 0 ? MetricUnit.decimal(100 * completed / ended, digits: 1) + "%" : "–",
                    MetricUnit.decimal(count("workflow.steps", "sequence=\(name)"), digits: 0),
                    MetricUnit.decimal(count("workflow.retries", "sequence=\(name)"), digits: 0)] + percentiles(duration).dropLast()
        }
        let table = HTML.table(headers: ["sequence", "started", "completed", "failed", "cancelled", "completed %", "handler runs",
                                         "retries", "p50 time", "p90 time", "p99 time"],
                               rows: rows, numericColumns: Set(1...10))
        let total = { (name: String, labels: String) in MetricUnit.decimal(results.total(name, labels: labels) ?? 0, digits: 0) }
        let notes = "Starts refused: \(total("workflow.rejected", "reason=resource_limit")) by an engine limit, "
            + "\(total("workflow.rejected", "reason=queue_full")) with too many queued while the app was not running, "
            + "\(total("workflow.rejected", "reason=device_off")) with the phone off. "
            + "Prompts: \(total("workflow.answers", "outcome=answered")) answered, \(total("workflow.answers", "outcome=never")) never answered, "
            + "\(total("workflow.answers", "outcome=lost")) lost with the app. "
            + "Engines restored after a kill: \(total("workflow.recoveries", "")); handler results lost in kills: \(total("workflow.lost_handlers", ""))."
        return table + "<p class=\"caption\">\(HTML.escape(notes))</p>"
    }
}

/// Step latencies and the time people took to answer.
struct WorkflowStepsPanel: DashboardPanel {
    let id = "workflow-steps"
    let title = "Workflow steps"
    let caption = "Per step, from the tick that starts it to its completion: handler time, queueing behind maxConcurrentSteps and the wait for the next tick (which power states stretch). Waits for people are under input wait."
    var wide: Bool { true }

    func body(for results: RunResults, context: DashboardContext) -> String? {
        var rows: [[String]] = []
        for name in sequences(results) {
            for metric in results.metrics(named: "workflow.step_latency") where metric.label("sequence") == name {
                let h = results.histogram(metric)
                guard !h.isEmpty else { continue }
                rows.append(["<code>\(HTML.escape(name))</code>", "<code>\(HTML.escape(metric.label("step") ?? ""))</code>",
                             MetricUnit.decimal(Double(h.totalCount), digits: 0)] + percentiles(h))
            }
            if let wait = results.metric(named: "workflow.input_wait", labels: "sequence=\(name)") {
                let h = results.histogram(wait)
                if !h.isEmpty {
                    rows.append(["<code>\(HTML.escape(name))</code>", "input wait (all prompts)", MetricUnit.decimal(Double(h.totalCount), digits: 0)]
                                + percentiles(h))
                }
            }
        }
        guard !rows.isEmpty else { return nil }
        return HTML.table(headers: ["sequence", "step", "count", "p50", "p90", "p99", "max"], rows: rows, numericColumns: Set(2...6))
    }
}

/// Active instances and completions over time, and completion time per window.
struct WorkflowActivityPanel: DashboardPanel {
    let id = "workflow-activity"
    let title = "Workflow activity"
    let caption = "Active instances fleet-wide at each bucket end, and instances started and finished per bucket."

    func body(for results: RunResults, context: DashboardContext) -> String? {
        guard let active = results.metric(named: "workflow.active") else { return nil }
        let t = { (values: [Double]) in zip(context.bucketStarts, values).map { (t: min($0 + context.bucket, context.duration), value: $1) } }
        let sum = { (name: String) in
            results.metrics(named: name).map { context.values(results, $0) }
                .reduce(context.bucketStarts.map { _ in 0.0 }) { zip($0, $1).map(+) }
        }
        let lines: [TimeChart.Line] = [
            .init(name: "active", color: Palette.series[0], points: t(context.values(results, active))),
            .init(name: "started per bucket", color: Palette.series[1], points: t(sum("workflow.started")), dashed: true),
            .init(name: "finished per bucket", color: Palette.series[2], points: t(sum("workflow.finished")), dashed: true),
        ]
        return context.timeChart { MetricUnit.decimal($0, digits: 0) }.lines(lines) + HTML.legend(lines.map { ($0.name, $0.color) })
    }
}

/// How long completed instances took, window by window.
struct WorkflowLatencyPanel: DashboardPanel {
    let id = "workflow-latency"
    let title = "Completion time over the day"
    let caption = "Median and p90 time from start to completion of the instances that completed in each bucket, per sequence."

    func body(for results: RunResults, context: DashboardContext) -> String? {
        var lines: [TimeChart.Line] = []
        for (index, name) in sequences(results).enumerated() {
            guard let metric = results.metric(named: "workflow.duration", labels: "outcome=completed,sequence=\(name)") else { continue }
            var p50: [(t: Int64, value: Double)] = [], p90: [(t: Int64, value: Double)] = []
            for start in context.bucketStarts {
                let h = results.histogram(metric, window: start)
                guard !h.isEmpty else { continue }
                let t = min(start + context.bucket, context.duration)
                p50.append((t, Double(h.value(atPercentile: 50))))
                p90.append((t, Double(h.value(atPercentile: 90))))
            }
            let color = Palette.series[index % Palette.series.count]
            lines.append(.init(name: "\(name) p50", color: color, points: p50))
            lines.append(.init(name: "\(name) p90", color: color, points: p90, dashed: true))
        }
        guard lines.contains(where: { !$0.points.isEmpty }) else { return nil }
        return context.timeChart { MetricUnit.formatDuration($0) }.lines(lines) + HTML.legend(lines.map { ($0.name, $0.color) })
    }
}

/// Engine ticks that did work, by power state.
struct WorkflowTicksPanel: DashboardPanel {
    let id = "workflow-ticks"
    let title = "Engine ticks with work"
    let caption = "Ticks on which the engine ran, by power state; the idle ones are in the ticks panel as fast-forwarded."

    func body(for results: RunResults, context: DashboardContext) -> String? {
        guard !results.metrics(named: "workflow.engine_ticks").isEmpty else { return nil }
        let groups = PowerState.allCases.enumerated().map { index, state in
            BarChart.Group(label: state.description, bars: [(state.description, Palette.powerStates[index],
                                                              results.total("workflow.engine_ticks", labels: "power_state=\(state.description)") ?? 0)])
        }
        return BarChart(format: { MetricUnit.decimal($0, digits: 0) }).stackedRows(groups)
    }
}
