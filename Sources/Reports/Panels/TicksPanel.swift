import LabKernel
import LabStore

/// Engine ticks per device-hour in each power state, split into ticks that ran and ticks
/// that were fast-forwarded because the engine had no work.
struct TicksPanel: DashboardPanel {
    let id = "ticks"
    let title = "Ticks per device-hour by power state"
    let caption = "Ticks divided by all device time in the state; the table adds the rate while the tick loop runs."

    static let states = ["Charging", "Unplugged", "LowBattery", "CriticalBattery"]

    func body(for results: RunResults, context: DashboardContext) -> String? {
        guard results.metric(named: "ticks", labels: "mode=executed,power_state=Unplugged") != nil else { return nil }
        var groups: [BarChart.Group] = []
        var rows: [[String]] = []
        for state in Self.states {
            let executed = results.total("ticks", labels: "mode=executed,power_state=\(state)") ?? 0
            let skipped = results.total("ticks", labels: "mode=fast_forwarded,power_state=\(state)") ?? 0
            let hours = (results.total("device.seconds", labels: "power_state=\(state)") ?? 0) / 3_600
            let activeHours = (results.total("device.active_seconds", labels: "power_state=\(state)") ?? 0) / 3_600
            let perHour = { (value: Double) in hours > 0 ? value / hours : 0 }
            groups.append(.init(label: state, bars: [("executed", Palette.executed, perHour(executed)),
                                                      ("fast-forwarded", Palette.fastForwarded, perHour(skipped))]))
            var perDevice = "–"
            if let metric = results.metric(named: "ticks.per_device_hour", labels: "power_state=\(state)") {
                let h = results.histogram(metric)
                if !h.isEmpty {
                    perDevice = MetricUnit.decimal(Double(h.value(atPercentile: 50)), digits: 0) + " / "
                        + MetricUnit.decimal(Double(h.value(atPercentile: 90)), digits: 0)
                }
            }
            rows.append([
                state, MetricUnit.decimal(hours, digits: 1), MetricUnit.decimal(activeHours, digits: 1),
                MetricUnit.decimal(executed, digits: 0), MetricUnit.decimal(skipped, digits: 0),
                MetricUnit.decimal(perHour(executed + skipped), digits: 0),
                MetricUnit.decimal(activeHours > 0 ? (executed + skipped) / activeHours : 0, digits: 0), perDevice,
            ])
        }
        let chart = BarChart(format: { MetricUnit.decimal($0, digits: 0) }).stackedRows(groups)
        return chart + HTML.legend([("executed", Palette.executed), ("fast-forwarded", Palette.fastForwarded)])
            + HTML.table(headers: ["state", "device-h", "tick-loop h", "executed", "fast-forwarded", "per device-h",
                                   "per tick-loop h", "device p50 / p90"],
                         rows: rows, numericColumns: Set(1...7))
    }
}
