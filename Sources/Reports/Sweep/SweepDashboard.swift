import LabKernel
import LabStore

/// The page of a capacity sweep: what was found, then latency, server load and energy
/// against fleet size. Self-contained like the run dashboard (inline CSS and SVG).
public enum SweepDashboard {
    public static func render(scenario: String, seed: UInt64, points: [SweepPoint], bound: Double, errorBudget: Double = 0.01,
                              progressChecks: Set<String> = []) -> String {
        let points = points.sorted { $0.devices < $1.devices }
        let sizes = points.map(\.devices)
        let findings = SweepAnalysis.findings(points, bound: bound, errorBudget: errorBudget, progressChecks: progressChecks)
        var sections = ""
        func section(_ title: String, _ caption: String, _ body: String, wide: Bool = true) {
            sections += "<section class=\"panel\(wide ? " wide" : "")\"><h2>\(HTML.escape(title))</h2><p class=\"caption\">\(HTML.escape(caption))</p>\(body)</section>\n"
        }
        let list = "<ul>" + findings.map { "<li>\(HTML.escape($0))</li>" }.joined() + "</ul>"
        let rows = points.map { point -> [String] in
            [MetricUnit.decimal(Double(point.devices), digits: 0), MetricUnit.formatDuration(point.wallSeconds * 1e9),
             point.invariantsHeld ? "<span class=\"pass\">held</span>"
                // Progress that stopped past saturation is a finding (amber), anything else a failure.
                : "<span class=\"\(SweepAnalysis.verdicts([point], progressChecks: progressChecks).isEmpty ? "overload" : "fail")\">"
                    + "\(HTML.escape(point.violated.joined(separator: ", ")))</span>"]
                + [SweepAnalysis.failureRate(point).map { MetricUnit.share.format($0) } ?? "–"]
                + ["sync", "chat"].map { stack in
                    point.servers.first { $0.stack == stack }.map { SweepAnalysis.percent($0.peakUtilisation) } ?? "–"
                }
                + ["<code>\(HTML.escape(point.resultsPath))</code>"]
        }
        section("What the sweep found", "p99 against a budget of \(MetricUnit.formatDuration(bound)) per endpoint, each stack's failed requests against \(MetricUnit.share.format(errorBudget)) of them; a server is saturated when its busiest bucket is \(Int(SweepAnalysis.saturated)) % busy.",
                list + HTML.table(headers: ["devices", "wall time", "invariants", "failed requests", "sync server, busiest bucket", "chat server, busiest bucket", "results"],
                                  rows: rows, numericColumns: [0, 1, 3, 4, 5]))
        for stack in ["sync", "chat"] {
            let routes = Set(points.flatMap { $0.endpoints.filter { $0.stack == stack }.map(\.endpoint) })
            guard !routes.isEmpty else { continue }
            // The endpoints slowest at the largest size, at most six, keep the chart readable.
            let largest = points.last!.endpoints.filter { $0.stack == stack }
            let shown = routes.sorted { a, b in
                let pa = largest.first { $0.endpoint == a }?.p99 ?? 0, pb = largest.first { $0.endpoint == b }?.p99 ?? 0
                return (pa, b) > (pb, a)
            }.prefix(6)
            let lines = shown.enumerated().map { index, route in
                SizeChart.Line(name: "\(route) p99", color: Palette.series[index % Palette.series.count],
                               points: points.compactMap { p in p.endpoints.first { $0.stack == stack && $0.endpoint == route }.map { (p.devices, $0.p99) } })
            }
            let chart = SizeChart(sizes: sizes, format: { MetricUnit.formatDuration($0) }, bounds: [(bound, "budget \(MetricUnit.formatDuration(bound))")])
            let table = HTML.table(headers: ["endpoint"] + sizes.map { MetricUnit.decimal(Double($0), digits: 0) + " p50 / p99" },
                                   rows: routes.sorted().map { route in
                                       ["<code>\(HTML.escape(route))</code>"] + points.map { p in
                                           p.endpoints.first { $0.stack == stack && $0.endpoint == route }
                                               .map { "\(MetricUnit.formatDuration($0.p50)) / \(MetricUnit.formatDuration($0.p99))" } ?? "–"
                                       }
                                   }, numericColumns: Set(1...sizes.count))
            section("\(stack) latency against fleet size", "p99 from the client's request to its answer, per endpoint (the slowest six at the largest size drawn).",
                    chart.render(lines) + HTML.legend(lines.map { ($0.name, $0.color) }) + table)
        }
        var load: [SizeChart.Line] = [], waits: [SizeChart.Line] = []
        for (index, stack) in ["sync", "chat"].enumerated() where points.contains(where: { $0.servers.contains { $0.stack == stack } }) {
            let series = points.compactMap { p in p.servers.first { $0.stack == stack }.map { (p.devices, $0) } }
            load.append(.init(name: "\(stack) busiest bucket", color: Palette.series[index * 2], points: series.map { ($0.0, $0.1.peakUtilisation) }))
            load.append(.init(name: "\(stack) mean", color: Palette.series[index * 2 + 1], points: series.map { ($0.0, $0.1.meanUtilisation) }))
            waits.append(.init(name: "\(stack) wait p99", color: Palette.series[index * 2], points: series.map { ($0.0, $0.1.waitP99) }))
        }
        if !load.isEmpty {
            let utilisation = SizeChart(sizes: sizes, format: { MetricUnit.decimal($0, digits: 0) + "%" }, bounds: [(100, "saturated")])
            let wait = SizeChart(sizes: sizes, format: { MetricUnit.formatDuration($0) })
            section("Server utilisation against fleet size", "Busy workers over the busiest 5-minute bucket and over the run.",
                    utilisation.render(load) + HTML.legend(load.map { ($0.name, $0.color) }), wide: false)
            section("Wait for a worker against fleet size", "p99 of the time a request waited in the server's queue.",
                    wait.render(waits) + HTML.legend(waits.map { ($0.name, $0.color) }), wide: false)
        }
        let energy = Set(points.flatMap { $0.energy.map(\.stack) })
        if !energy.isEmpty {
            let lines = RunFigures.stacks.filter(energy.contains).enumerated().map { index, stack in
                SizeChart.Line(name: "\(stack) J per device-hour", color: Palette.series[index],
                               points: points.compactMap { p in p.energy.first { $0.stack == stack }.map { (p.devices, $0.joulesPerDeviceHour) } })
            }
            section("Energy per device-hour against fleet size", "A device's cost should not depend on how many others there are; where it grows, retries and reconnects do.",
                    SizeChart(sizes: sizes, format: { MetricUnit.decimal($0, digits: 1) + " J" }).render(lines) + HTML.legend(lines.map { ($0.name, $0.color) }),
                    wide: false)
        }
        let spread = points.compactMap { p in p.everyStackEnergy.map { (p.devices, $0) } }
        if !spread.isEmpty {
            let lines: [SizeChart.Line] = [
                .init(name: "p50", color: Palette.series[0], points: spread.map { ($0.0, $0.1.p50) }),
                .init(name: "p90", color: Palette.series[1], points: spread.map { ($0.0, $0.1.p90) }),
                .init(name: "p99", color: Palette.series[3], points: spread.map { ($0.0, $0.1.p99) }),
            ]
            // Percentiles, not the most any phone paid: a larger fleet has a larger maximum by
            // sampling alone.
            section("Battery a day per device against fleet size", "What every stack together took of a phone's battery a day: the typical phone, one in ten, and one in a hundred.",
                    SizeChart(sizes: sizes, format: { MetricUnit.decimal($0, digits: 1) + "%" }).render(lines) + HTML.legend(lines.map { ($0.name, $0.color) }),
                    wide: false)
        }
        let title = "fleetlab sweep: \(scenario)"
        return """
        <!DOCTYPE html>
        <html lang="en"><head><meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>\(HTML.escape(title))</title>
        <style>\(Dashboard.stylesheet)</style></head>
        <body><header><h1>\(HTML.escape(title))</h1><p>\(HTML.escape("seed \(seed) · \(points.count) sizes from \(MetricUnit.decimal(Double(sizes.first ?? 0), digits: 0)) to \(MetricUnit.decimal(Double(sizes.last ?? 0), digits: 0)) devices"))</p></header>
        <main>
        \(sections)</main>
        <footer>Generated by fleetlab sweep; each point's results.sqlite and dashboard.html are in its folder.</footer>
        </body></html>
        """
    }
}
