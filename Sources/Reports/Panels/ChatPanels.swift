import LabKernel
import LabStore

/// Chat latency: acknowledgement and delivery (decrypted on a recipient device) by channel kind.
struct ChatLatencyPanel: DashboardPanel {
    let id = "chat-latency"
    let title = "Chat latency"
    let caption = "Send → server acknowledgement → decrypted on each recipient device, by channel kind; delivery includes devices catching up after being offline."
    var wide: Bool { true }

    func body(for results: RunResults, context: DashboardContext) -> String? {
        guard !results.metrics(named: "chat.delivery_latency").isEmpty else { return nil }
        var rows: [[String]] = []
        for (kind, label) in [("dm", "DM"), ("group", "group")] {
            for (name, what) in [("chat.ack_latency", "acknowledged"), ("chat.delivery_latency", "decrypted by a recipient")] {
                guard let metric = results.metric(named: name, labels: "kind=\(kind)") else { continue }
                let h = results.histogram(metric)
                rows.append(["\(label), \(what)", MetricUnit.decimal(Double(h.totalCount), digits: 0)]
                    + durationPercentiles(h))
            }
        }
        var lines: [TimeChart.Line] = []
        for (index, kind) in ["dm", "group"].enumerated() {
            guard let metric = results.metric(named: "chat.delivery_latency", labels: "kind=\(kind)") else { continue }
            lines.append(.init(name: "\(kind) delivery p50", color: Palette.series[index], points: percentileOverTime(results, metric, 50, context)))
        }
        let chart = context.timeChart { MetricUnit.formatDuration($0) }.lines(lines) + HTML.legend(lines.map { ($0.name, $0.color) })
        return HTML.table(headers: ["", "count", "p50", "p90", "p99"], rows: rows, numericColumns: Set(1...4)) + chart
    }
}

/// Chat activity: messages, decryptions (and failures, which must be zero), reconnects, keys.
struct ChatActivityPanel: DashboardPanel {
    let id = "chat-activity"
    let title = "Chat activity"
    let caption = "Messages acknowledged per bucket by kind, devices connected; totals of decryptions, failures (must be zero), reconnects, one-time-key uploads and token refreshes."
    var wide: Bool { true }

    func body(for results: RunResults, context: DashboardContext) -> String? {
        guard results.metric(named: "chat.decrypted") != nil else { return nil }
        let kinds = [("dm", Palette.series[0]), ("group", Palette.series[1])]
        var lines = kinds.map { kind, color in
            TimeChart.Line(name: "\(kind) messages", color: color,
                           points: atEnds(context, context.values(results, results.metric(named: "chat.messages", labels: "kind=\(kind)"))))
        }
        lines.append(TimeChart.Line(name: "devices connected", color: Palette.series[2],
                                    points: atEnds(context, context.values(results, results.metric(named: "chat.connected"))), dashed: true))
        let chart = context.timeChart { MetricUnit.decimal($0, digits: 0) }.lines(lines) + HTML.legend(lines.map { ($0.name, $0.color) })
        let total = { (name: String) in MetricUnit.decimal(results.total(name, labels: "") ?? 0, digits: 0) }
        let rows = [["decrypted", total("chat.decrypted")], ["decryption failures", total("chat.decryption_failures")],
                    ["reconnect attempts", total("chat.reconnects")], ["one-time-key uploads (keys.low_otp)", total("chat.otk_replenished")],
                    ["token refreshes", total("chat.refreshes")]]
        return chart + HTML.table(headers: ["", "total"], rows: rows, numericColumns: [1])
    }
}
