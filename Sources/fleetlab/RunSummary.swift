import Foundation
import LabKernel
import LabStore
import Reports
import Simulator

/// The one-screen summary `fleetlab simulate` prints when a run ends.
struct RunSummary {
    var scenarioPath: String
    var scenario: Scenario
    var outcome: SimulationOutcome
    var results: RunResults
    var resultsPath: String
    var dashboardPath: String
    var digest: String

    var text: String {
        let n = { (v: Double) in MetricUnit.decimal(v, digits: 0) }
        var lines: [String] = []
        let status = outcome.interrupted ? "INTERRUPTED" : (outcome.passed ? "PASSED" : "FAILED")
        lines.append("fleetlab simulate \(scenario.name) — seed \(scenario.seed) — \(status)")
        lines.append("")
        lines.append(row("devices", "\(n(Double(outcome.devices))) in \(scenario.devices.count) populations ("
            + scenario.devices.map { "\($0.name) \(n(Double($0.count)))" }.joined(separator: ", ") + ")"
            + (scenario.shard.map { ": shard \($0) of the fleet, its own servers" } ?? "")))
        lines.append(row("simulated", "\(outcome.simulated) from \(timeOfDay(scenario.startAt)), ticks every \(scenario.ticks.interval) (\(scenario.ticks.mode.rawValue))"))
        let rate = outcome.wallSeconds > 0 ? Double(outcome.events) / outcome.wallSeconds : 0
        var pace = "\(n(Double(outcome.events))) in \(MetricUnit.formatDuration(outcome.wallSeconds * 1e9)) wall (\(n(rate)) events/s)"
        if let rss = WallClock.peakResidentBytes() {
            pace += ", peak RSS \(MetricUnit.decimal(Double(rss) / 1_048_576, digits: 1)) MiB"
        }
        lines.append(row("events", pace))
        if scenario.chaos > 0 {
            lines.append(row("chaos", "\(scenario.chaos) faults drawn from seed \(scenario.seed), after the scenario's own:"))
            for fault in scenario.faults.suffix(scenario.chaos) { lines.append("      - \(fault.yaml)") }
        }
        let executed = sum("ticks") { $0.label("mode") == "executed" }
        let skipped = sum("ticks") { $0.label("mode") == "fast_forwarded" }
        lines.append(row("ticks", "\(n(executed + skipped)) (\(n(executed)) executed, \(n(skipped)) fast-forwarded)"))
        var perState: [String] = []
        for state in PowerState.allCases {
            let ticks = sum("ticks") { $0.label("power_state") == state.description }
            let hours = (results.total("device.seconds", labels: "power_state=\(state)") ?? 0) / 3600
            if hours > 0 { perState.append("\(state) \(n(ticks / hours))") }
        }
        lines.append(row("ticks/device-h", perState.joined(separator: "  ")))
        let causes = LifecycleCause.allCases.map(\.description)
        lines.append(row("lifecycle", causes.compactMap { cause in
            let v = results.total("lifecycle.transitions", labels: "cause=\(cause)") ?? 0
            return v > 0 ? "\(n(v)) \(cause.replacingOccurrences(of: "_", with: " "))" : nil
        }.joined(separator: " · ")))
        let endpoints = RunFigures.endpoints(results)
        if !endpoints.isEmpty {
            lines.append(row("latency", "p50 / p99 per endpoint (requests, failures)"))
            let width = endpoints.map { $0.stack.count + $0.endpoint.count + 1 }.max() ?? 0
            for e in endpoints {
                let name = "\(e.stack) \(e.endpoint)"
                lines.append("      " + name + String(repeating: " ", count: width - name.count + 2)
                    + "\(MetricUnit.formatDuration(e.p50)) / \(MetricUnit.formatDuration(e.p99))  (\(n(Double(e.requests))), \(n(e.failures)) failed)")
            }
        }
        if let cost = RunFigures.syncCost(results), !cost.cadence.isEmpty {
            lines.append(row("sync cadence", cost.cadence.map { "\($0.powerState) every \(MetricUnit.formatDuration($0.p50))" }.joined(separator: "  ")
                + "  (p50; \(MetricUnit.decimal(cost.joulesPerSync, digits: 2)) J a sync)"))
        }
        let energy = RunFigures.energy(results)
        if !energy.isEmpty {
            lines.append(row("battery/stack", energy.map {
                "\($0.stack) \(MetricUnit.decimal($0.batteryPercentPerDay, digits: 2))%/day (\(MetricUnit.decimal($0.joulesPerDeviceHour, digits: 1)) J/device-h)"
            }.joined(separator: "  ")))
        }
        let perDevice = RunFigures.deviceEnergy(results)
        if let all = perDevice.first(where: { $0.stack == "all" && $0.population == nil }) {
            let percent = { (value: Double) in MetricUnit.decimal(value, digits: 2) + "%" }
            let stacks = perDevice.filter { $0.stack != "all" }.map { "\($0.stack) \(percent($0.p99))" }.joined(separator: "  ")
            lines.append(row("battery/device", "p50 \(percent(all.p50))  p90 \(percent(all.p90))  p99 \(percent(all.p99))  most \(percent(all.max)) a day"
                                + " (every stack; p99 by stack: \(stacks))"))
        }
        if outcome.thresholds.isEmpty {
            lines.append(row("thresholds", "none set"))
        } else {
            let passed = outcome.thresholds.filter(\.passed).count
            lines.append(row("thresholds", "\(passed) of \(outcome.thresholds.count) passed"))
            for t in outcome.thresholds { lines.append("      \(t.passed ? "✓" : "✗") \(t.message)") }
        }
        let checks = outcome.invariants.reduce(Int64(0)) { $0 + $1.checks }
        let broken = outcome.invariants.filter { !$0.passed }
        lines.append(row("invariants", broken.isEmpty ? "\(outcome.invariants.count) held over \(n(Double(checks))) checks"
            : "\(broken.count) of \(outcome.invariants.count) violated"))
        for i in broken { lines.append("      ✗ \(i.name): \(i.violations) violations, first: \(i.firstViolation ?? "")") }
        lines.append(row("results", "\(resultsPath)  (digest \(digest.prefix(16)))"))
        lines.append(row("dashboard", dashboardPath))
        lines.append("")
        lines.append("reproduce with: fleetlab simulate \(scenarioPath) --seed \(scenario.seed)"
            + (scenario.deviceCount != 0 ? " --devices \(scenario.deviceCount)" : "") + " --duration \(scenario.duration)"
            + (scenario.shard.map { " --shard \($0)" } ?? "") + ChaosOption.argument(scenario.chaos))
        return lines.joined(separator: "\n")
    }

    func row(_ key: String, _ value: String) -> String {
        "  " + key + String(repeating: " ", count: max(1, 16 - key.count)) + value
    }

    func sum(_ name: String, where include: (MetricDescriptor) -> Bool) -> Double {
        results.metrics(named: name).filter(include).reduce(0) { $0 + (results.counterTotals[$1.id] ?? 0) }
    }

    func timeOfDay(_ span: TimeSpan) -> String {
        let minutes = span.nanoseconds / 60_000_000_000
        let h = minutes / 60, m = minutes % 60
        return (h < 10 ? "0" : "") + "\(h):" + (m < 10 ? "0" : "") + "\(m)"
    }
}
