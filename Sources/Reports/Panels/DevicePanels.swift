import LabKernel
import LabStore

/// Battery level of the fleet over time: the 10th–90th percentile band, the median and the mean.
struct BatteryPanel: DashboardPanel {
    let id = "battery"
    let title = "Battery level"
    let caption = "Every device sampled at the end of each bucket: median, mean and the 10th–90th percentile band."

    func body(for results: RunResults, context: DashboardContext) -> String? {
        guard let metric = results.metric(named: "battery.level") else { return nil }
        var band: [(t: Int64, low: Double, high: Double)] = []
        var median: [(t: Int64, value: Double)] = []
        for start in context.bucketStarts {
            let h = results.histogram(metric, window: start)
            guard !h.isEmpty else { continue }
            let end = min(start + context.bucket, context.duration)
            band.append((end, Double(h.value(atPercentile: 10)), Double(h.value(atPercentile: 90))))
            median.append((end, Double(h.value(atPercentile: 50))))
        }
        guard !median.isEmpty else { return nil }
        let meanValues = context.values(results, results.metric(named: "battery.mean"))
        let mean = zip(context.bucketStarts, meanValues).map { (t: min($0 + context.bucket, context.duration), value: $1) }
        var chart = context.timeChart { MetricUnit.decimal($0, digits: 0) + "%" }
        chart.yMaxOverride = 100
        return chart.lines([
            .init(name: "median", color: Palette.series[0], points: median),
            .init(name: "mean", color: Palette.series[1], points: mean, dashed: true),
        ], bands: [.init(name: "p10–p90", color: Palette.series[0], points: band)])
            + HTML.legend([("median", Palette.series[0]), ("mean", Palette.series[1]), ("p10–p90", "#b9cff0")])
    }
}

/// A stacked-area panel of a gauge family (devices per state).
struct GaugeShares {
    var metric: String
    var label: String
    var order: [String]
    var colors: [String]

    func render(_ results: RunResults, _ context: DashboardContext) -> String? {
        let metrics = order.compactMap { value in results.metrics(named: metric).first { $0.label(label) == value } }
        guard !metrics.isEmpty, metrics.contains(where: { !(results.series[$0.id] ?? []).isEmpty }) else { return nil }
        let layers = metrics.enumerated().map { index, m in
            TimeChart.Layer(name: m.label(label) ?? m.labels, color: colors[index % colors.count], values: context.values(results, m))
        }
        let chart = context.timeChart { MetricUnit.decimal($0, digits: 0) }
        return chart.stacked(layers, ts: context.bucketStarts, bucket: context.bucket)
            + HTML.legend(layers.map { ($0.name, $0.color) })
    }
}

struct PowerStatePanel: DashboardPanel {
    let id = "power-states"
    let title = "Power states"
    let caption = "Devices per reported power state at the end of each bucket (tick multiplier 1, 1, 2, 4)."

    func body(for results: RunResults, context: DashboardContext) -> String? {
        GaugeShares(metric: "devices.power_state", label: "power_state",
                    order: ["Charging", "Unplugged", "LowBattery", "CriticalBattery"], colors: Palette.powerStates)
            .render(results, context)
    }
}

struct AppStatePanel: DashboardPanel {
    let id = "app-states"
    let title = "App lifecycle"
    let caption = "Devices whose app is in the foreground, alive in the background, killed, or whose phone is off."

    func body(for results: RunResults, context: DashboardContext) -> String? {
        GaugeShares(metric: "devices.app_state", label: "state",
                    order: ["foreground", "background", "killed", "powered_off"], colors: Palette.appStates)
            .render(results, context)
    }
}

struct NetworkPanel: DashboardPanel {
    let id = "network"
    let title = "Network"
    let caption = "Devices on Wi-Fi, on cellular, or offline (offline windows, radio faults, phones that are off)."

    func body(for results: RunResults, context: DashboardContext) -> String? {
        GaugeShares(metric: "devices.network", label: "network", order: ["wifi", "cellular", "offline"], colors: Palette.networks)
            .render(results, context)
    }
}
