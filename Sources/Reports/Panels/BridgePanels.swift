import LabKernel
import LabStore

/// AI bridge requests: how commands ended and how long they took through the relay,
/// pairings and their time, daemon restarts.
struct BridgeRequestsPanel: DashboardPanel {
    let id = "ai-bridge-requests"
    let title = "AI bridge: requests and pairing"
    let caption = "Commands by outcome with their latency through the relay (from the phone's request to the whole answer, or the failure); the first chunk of an answer; pairings after the first and their time; daemon restarts."
    var wide: Bool { true }

    func body(for results: RunResults, context: DashboardContext) -> String? {
        guard !results.metrics(named: "bridge.requests").isEmpty || results.metric(named: "bridge.first_chunk") != nil else { return nil }
        var rows: [[String]] = []
        for metric in results.metrics(named: "bridge.latency") {
            let h = results.histogram(metric)
            guard !h.isEmpty else { continue }
            rows.append([metric.label("outcome") ?? "", MetricUnit.decimal(Double(h.totalCount), digits: 0)] + durationPercentiles(h))
        }
        for (name, what) in [("bridge.first_chunk", "first chunk of an answer"), ("bridge.pairing_time", "pairing (PIN to keychain)")] {
            guard let metric = results.metric(named: name) else { continue }
            let h = results.histogram(metric)
            rows.append([what, MetricUnit.decimal(Double(h.totalCount), digits: 0)] + durationPercentiles(h))
        }
        let total = { (name: String, labels: String) in MetricUnit.decimal(results.total(name, labels: labels) ?? 0, digits: 0) }
        let pairings = ["ok", "refused", "offline", "throttled", "timed_out"].map { "\($0) \(total("bridge.pairings", "outcome=\($0)"))" }
        let table = HTML.table(headers: ["", "count", "p50", "p90", "p99"], rows: rows, numericColumns: Set(1...4))
        // A load test pairs each phone once, with a desktop of the generator's, before its clock starts.
        guard results.runMetadata["mode"] != "loadtest" else {
            return table + "<p class=\"caption\">Pairings, each phone with its desktop before the clock started: \(pairings.joined(separator: ", ")).</p>"
        }
        return table
            + "<p class=\"caption\">Pairings after the first: \(pairings.joined(separator: ", ")). Phones paired again after their token stopped working: "
            + "\(total("bridge.repairs", "")); daemon restarts: \(total("bridge.daemon_restarts", "")).</p>"
    }
}

/// The share of commands that found the desktop offline (503), bucket by bucket, beside
/// the daemons online: laptops closing at night, restarts, a relay crash.
struct BridgeOfflinePanel: DashboardPanel {
    let id = "ai-bridge-offline"
    let title = "AI bridge: desktops offline"
    let caption = "Per bucket: the share of commands answered 503 bridge_offline (%), and the daemons with a tunnel to the relay at its end (dashed, a count on the same scale)."
    var wide: Bool { true }

    func body(for results: RunResults, context: DashboardContext) -> String? {
        guard let offline = results.metric(named: "bridge.requests", labels: "outcome=bridge_offline") else { return nil }
        let down = context.values(results, offline)
        var all = [Double](repeating: 0, count: down.count)
        for metric in results.metrics(named: "bridge.requests") {
            for (index, value) in context.values(results, metric).enumerated() where index < all.count { all[index] += value }
        }
        let share = zip(down, all).map { $1 > 0 ? $0 / $1 * 100 : 0 }
        let lines = [
            TimeChart.Line(name: "503 share %", color: Palette.series[3], points: atEnds(context, share)),
            TimeChart.Line(name: "daemons online", color: Palette.series[2], points: atEnds(context, context.values(results, results.metric(named: "bridge.daemons_online"))),
                           dashed: true),
        ]
        return context.timeChart { MetricUnit.decimal($0, digits: 0) }.lines(lines) + HTML.legend(lines.map { ($0.name, $0.color) })
    }
}
