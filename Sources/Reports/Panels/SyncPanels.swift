import LabKernel
import LabStore


/// Sync request latency percentiles, bucket by bucket, and how requests ended.
struct SyncLatencyPanel: DashboardPanel {
    let id = "sync-latency"
    let title = "Sync latency"
    let caption = "From a device sending a sync to its answer arriving, per bucket (network, server queue, service). Shaded: faults in force."
    var wide: Bool { true }

    func body(for results: RunResults, context: DashboardContext) -> String? {
        guard let metric = results.metric(named: "sync.latency") else { return nil }
        var lines: [TimeChart.Line] = []
        for (index, q) in [50.0, 90, 99].enumerated() {
            lines.append(.init(name: "p\(Int(q))", color: Palette.series[index], points: percentileOverTime(results, metric, q, context), dashed: index > 0))
        }
        let latency = context.timeChart { MetricUnit.formatDuration($0) }.lines(lines) + HTML.legend(lines.map { ($0.name, $0.color) })
        let outcomes = ["ok", "timeout", "unreachable", "refused"]
        let outcomeLines = outcomes.enumerated().map { index, outcome in
            TimeChart.Line(name: outcome, color: [Palette.series[2], Palette.series[3], Palette.series[1], Palette.series[4]][index],
                           points: atEnds(context, context.values(results, results.metric(named: "sync.requests", labels: "outcome=\(outcome)"))))
        }
        let requests = context.timeChart { MetricUnit.decimal($0, digits: 0) }.lines(outcomeLines) + HTML.legend(outcomeLines.map { ($0.name, $0.color) })
        return latency + "<p class=\"caption\">Requests per bucket by outcome:</p>" + requests
    }
}

/// The interval between syncs devices actually kept, by power state.
struct SyncCadencePanel: DashboardPanel {
    let id = "sync-cadence"
    let title = "Sync cadence by power state"
    let caption = "Time between a device's consecutive syncs: the server asks for 30 s (5 s with commands pending), counted in ticks, so low battery stretches it; pushes shorten it."

    func body(for results: RunResults, context: DashboardContext) -> String? {
        let rows: [[String]] = PowerState.allCases.compactMap { state in
            guard let metric = results.metric(named: "sync.interval", labels: "power_state=\(state.description)") else { return nil }
            let h = results.histogram(metric)
            guard !h.isEmpty else { return nil }
            return [state.description, MetricUnit.decimal(Double(h.totalCount), digits: 0)] + durationPercentiles(h, [10, 50, 90])
        }
        guard !rows.isEmpty else { return nil }
        return HTML.table(headers: ["power state", "intervals", "p10", "p50", "p90"], rows: rows, numericColumns: Set(1...4))
    }
}

/// Outbox depth over time: what devices hold back while they cannot sync.
struct SyncOutboxPanel: DashboardPanel {
    let id = "sync-outbox"
    let title = "Outbox depth"
    let caption = "Entries waiting in device outboxes, fleet-wide, at each bucket end: it rises while devices cannot reach the server and drains when they can."

    func body(for results: RunResults, context: DashboardContext) -> String? {
        guard let metric = results.metric(named: "sync.outbox_depth") else { return nil }
        let line = TimeChart.Line(name: "outbox entries", color: Palette.series[1], points: atEnds(context, context.values(results, metric)))
        return context.timeChart { MetricUnit.decimal($0, digits: 0) }.lines([line])
    }
}

/// The server's worker pool: utilisation and the queue in front of it.
struct SyncServerPanel: DashboardPanel {
    let id = "sync-server"
    let title = "Sync server load"
    let caption = "Worker utilisation per bucket and requests waiting for a worker at each bucket end."

    func body(for results: RunResults, context: DashboardContext) -> String? {
        guard let utilisation = results.metric(named: "sync.server_utilisation"),
              let queue = results.metric(named: "sync.server_queue") else { return nil }
        let busy = TimeChart.Line(name: "utilisation %", color: Palette.series[0], points: atEnds(context, context.values(results, utilisation)))
        let waiting = TimeChart.Line(name: "queue length", color: Palette.series[3], points: atEnds(context, context.values(results, queue)))
        var wait = ""
        if let metric = results.metric(named: "sync.server_wait") {
            let h = results.histogram(metric)
            wait = "<p class=\"caption\">Wait for a worker: p50 \(durationPercentiles(h)[0]), p90 \(durationPercentiles(h)[1]), p99 \(durationPercentiles(h)[2]).</p>"
        }
        return context.timeChart { MetricUnit.decimal($0, digits: 1) }.lines([busy]) + HTML.legend([(busy.name, busy.color)])
            + context.timeChart { MetricUnit.decimal($0, digits: 0) }.lines([waiting]) + HTML.legend([(waiting.name, waiting.color)]) + wait
    }
}

/// Approvals end to end, command delivery with and without a push, and the pushes.
struct SyncCommandsPanel: DashboardPanel {
    let id = "sync-commands"
    let title = "Approvals and commands"
    let caption = "Approval round trip: the device hands a gate to the operator, the operator decides, the device applies it. Command latency: from creation on the server to application on the device."
    var wide: Bool { true }

    func body(for results: RunResults, context: DashboardContext) -> String? {
        guard let roundTrip = results.metric(named: "sync.approval_round_trip") else { return nil }
        var rows: [[String]] = []
        let h = results.histogram(roundTrip)
        rows.append(["approval round trip", MetricUnit.decimal(Double(h.totalCount), digits: 0)] + durationPercentiles(h))
        for (push, label) in [("yes", "command, announced by a push"), ("no", "command, picked up by polling")] {
            guard let metric = results.metric(named: "sync.command_latency", labels: "push=\(push)") else { continue }
            let h = results.histogram(metric)
            rows.append([label, MetricUnit.decimal(Double(h.totalCount), digits: 0)] + durationPercentiles(h))
        }
        let table = HTML.table(headers: ["", "count", "p50", "p90", "p99"], rows: rows, numericColumns: Set(1...4))
        let total = { (name: String, labels: String) in MetricUnit.decimal(results.total(name, labels: labels) ?? 0, digits: 0) }
        let notes = "Approvals created \(total("sync.approvals_created", "")), resolved \(total("sync.approvals_resolved", "")). "
            + "Commands applied \(total("sync.commands", "outcome=applied")), refused for good \(total("sync.commands", "outcome=refused")), "
            + "left for redelivery \(total("sync.commands", "outcome=deferred")), seen again and re-acknowledged \(total("sync.commands", "outcome=duplicate")). "
            + "Pushes delivered \(total("sync.pushes", "outcome=delivered")), lost \(total("sync.pushes", "outcome=lost")), "
            + "dropped in an outage \(total("sync.pushes", "outcome=outage")), duplicated \(total("sync.pushes", "outcome=duplicate")), "
            + "reaching an app that was not running \(total("sync.pushes", "outcome=not_running"))."
        return table + "<p class=\"caption\">\(HTML.escape(notes))</p>"
    }
}
