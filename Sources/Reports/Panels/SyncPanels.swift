import LabKernel
import LabStore


/// Sync request latency percentiles, bucket by bucket, and how requests ended.
struct SyncLatencyPanel: DashboardPanel {
    let id = "sync-latency"
    let title = "Sync latency"
    let caption = "From a device sending a sync to its answer arriving, per bucket (network, server queue, service). Shaded: faults in force."
    var wide: Bool { true }

    func body(for results: RunResults, context: DashboardContext) -> String? {
        let sync = results.metrics(named: "http.latency").filter { $0.label("stack") == "sync" }
        guard let metric = sync.first(where: { $0.label("endpoint") == "POST /api/v1/mobile/sync" }) ?? sync.first else { return nil }
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
        // A load test records requests by endpoint, not sync outcomes: no empty chart.
        guard !results.metrics(named: "sync.requests").isEmpty else { return latency }
        return latency + "<p class=\"caption\">Requests per bucket by outcome:</p>" + requests
    }
}

/// The interval between syncs devices actually kept, by power state, and what it costs.
struct SyncCadencePanel: DashboardPanel {
    let id = "sync-cadence"
    let title = "Sync cadence by power state, and its cost"
    let caption = "Time between a device's consecutive syncs: the server asks for 30 s (5 s with commands pending), counted in ticks, so low battery stretches it; pushes shorten it. Cost: a device syncing at the median cadence all day, at the run's energy per sync."

    func body(for results: RunResults, context: DashboardContext) -> String? {
        let cost = RunFigures.syncCost(results)
        let rows: [[String]] = PowerState.allCases.compactMap { state in
            guard let metric = results.metric(named: "sync.interval", labels: "power_state=\(state.description)") else { return nil }
            let h = results.histogram(metric)
            guard !h.isEmpty else { return nil }
            // Without energy figures (a load test's phones have no battery) the cadence still has a rate.
            let cadence = cost?.cadence.first { $0.powerState == state.description }
                ?? SyncCost.Cadence(powerState: state.description, intervals: h.totalCount, p50: Double(h.value(atPercentile: 50)))
            let perDay = cost.map { MetricUnit.decimal($0.batteryPercentPerDay(cadence), digits: 2) + "%" } ?? "–"
            return [state.description, MetricUnit.decimal(Double(h.totalCount), digits: 0)] + durationPercentiles(h, [10, 50, 90])
                + [MetricUnit.decimal(cadence.syncsPerHour, digits: 1), perDay]
        }
        guard !rows.isEmpty else { return nil }
        let table = HTML.table(headers: ["power state", "intervals", "p10", "p50", "p90", "syncs / h at p50", "battery / day"], rows: rows,
                               numericColumns: Set(1...6))
        guard let cost else { return table }
        return table + "<p class=\"caption\">\(MetricUnit.decimal(cost.syncs, digits: 0)) syncs at \(MetricUnit.decimal(cost.joulesPerSync, digits: 2)) J each "
            + "(radio and CPU; a sync inside another transfer's radio tail costs less).</p>"
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
            + "The pushes that announced commands are in the pushes panel."
        return table + "<p class=\"caption\">\(HTML.escape(notes))</p>"
    }
}
