import Foundation
import LabKernel
import LabStore
import LoadTest
import Reports
import Simulator
import Synchronization

/// The progress line of a load test on stderr: elapsed, requests per second, errors, the
/// last second's p99 and the generator's CPU. Redrawn in place on a terminal; a line every
/// ten seconds otherwise (CI logs).
final class LoadProgressLine: Sendable {
    let enabled: Bool
    let duration: Double
    let last = Mutex<(printed: Double, requests: Int, at: Double)>((-10, 0, 0))

    init(enabled: Bool, duration: Double) {
        self.enabled = enabled
        self.duration = duration
    }

    func show(_ p: LoadRun.Progress) {
        guard enabled else { return }
        let terminal = Console.stderrIsTerminal
        let text: String? = last.withLock { state in
            let rate = p.elapsed > state.at ? Double(p.requests - state.requests) / (p.elapsed - state.at) : 0
            state.requests = p.requests
            state.at = p.elapsed
            guard terminal || p.elapsed - state.printed >= 10 else { return nil }
            state.printed = p.elapsed
            let share = p.errors > 0 && p.requests > 0 ? " (\(MetricUnit.share.format(Double(p.errors) / Double(p.requests))))" : ""
            return "  \(Int(p.elapsed))s/\(Int(duration))s  \(MetricUnit.decimal(rate, digits: 0)) req/s  \(p.errors) errors\(share)  "
                + "p99 \(p.p99.map { MetricUnit.formatDuration(Double($0)) } ?? "—")  generator CPU \(MetricUnit.decimal(p.cpuPercent, digits: 0))%"
        }
        guard let text else { return }
        FileHandle.standardError.write(Data((terminal ? "\r\u{1B}[2K" + text : text + "\n").utf8))
    }

    func finish() {
        if enabled && Console.stderrIsTerminal { FileHandle.standardError.write(Data("\r\u{1B}[2K".utf8)) }
    }
}

/// What `fleetlab loadtest` prints when it ends.
struct LoadtestSummary {
    var results: RunResults
    var outcome: LoadRun.Outcome
    var model: WorkloadModel
    var connections: ConnectionModel
    var target: String
    var skipped: [Threshold]
    /// The scenario's faults, which a load test does not inject.
    var faults: [Fault] = []
    var resultsPath: String
    var dashboardPath: String

    static let nothingSucceededMessage = "no iteration succeeded: the targets refused every one (see the failures); the run fails with or without thresholds"

    /// The generator is the bottleneck when its CPU is near what its event loops can use
    /// (this share of it), or iterations started late by more than this at p99.
    static let cpuBound = 85.0
    static let lagBound: Double = 50_000_000

    /// `RunResults.nothingSucceeded` as a JUnit test case, for a load test's results; nil
    /// for a simulation's.
    static func junitCase(_ results: RunResults) -> JUnitReport.Case? {
        guard results.metrics.contains(where: { $0.name == "loadtest.iterations" }) else { return nil }
        return JUnitReport.Case(name: "some iteration succeeded", classname: "loadtest",
                                failure: results.nothingSucceeded ? nothingSucceededMessage : nil, failureType: "loadtest")
    }

    /// Thresholds held, none aborted the run, and some iteration succeeded.
    var passed: Bool { outcome.passed && !results.nothingSucceeded }

    var text: String {
        let n = { (v: Double) in MetricUnit.decimal(v, digits: 0) }
        var lines: [String] = []
        lines.append("fleetlab loadtest \(results.scenario.name) — \(outcome.interrupted ? "INTERRUPTED" : passed ? "PASSED" : "FAILED")")
        lines.append("")
        if let aborted = outcome.aborted {
            lines.append(row("aborted", "at \(MetricUnit.formatDuration(aborted.seconds * 1e9)): \(aborted.threshold.message) (abortOnFail)"))
        }
        lines.append(row("target", target))
        lines.append(row("model", LoadtestCommand.describe(model, connections)))
        if let shard = results.runMetadata["shard"] {
            lines.append(row("shard", "\(shard): one generator's share of the workload; merge every shard's results with fleetlab merge"))
        }
        let ok = results.total("loadtest.iterations", labels: "outcome=ok") ?? 0
        let failed = results.total("loadtest.iterations", labels: "outcome=failed") ?? 0
        let dropped = results.total("loadtest.iterations", labels: "outcome=dropped") ?? 0
        lines.append(row("iterations", "\(n(ok)) ok, \(n(failed)) failed, \(n(dropped)) dropped in \(MetricUnit.formatDuration(outcome.wallSeconds * 1e9))"
            + (results.nothingSucceeded ? "\n      ✗ \(Self.nothingSucceededMessage)" : "")))
        let endpoints = RunFigures.endpoints(results)
        let requests = endpoints.reduce(0.0) { $0 + Double($1.requests) }
        let failures = endpoints.reduce(0) { $0 + $1.failures }
        lines.append(row("requests", "\(n(requests)) (\(MetricUnit.decimal(requests / max(outcome.wallSeconds, 1e-9), digits: 1))/s), "
            + "\(n(failures)) failed" + (failures > 0 && requests > 0 ? " (\(MetricUnit.share.format(failures / requests)))" : "")))
        var notes: [String] = []
        if Set(endpoints.map(\.stack)).count > 1 { notes.append("a later stack's step from its own start") }
        if endpoints.contains(where: { $0.stack == "agent" }) { notes.append("an agent chat's later requests from their send") }
        if endpoints.contains(where: { $0.stack == "chat" }) { notes.append("chat requests from their send, delivery from the step's start") }
        lines.append(row("latency", "p50 / p90 / p99 from each iteration's intended start" + (notes.isEmpty ? "" : " (" + notes.joined(separator: "; ") + ")")))
        let width = endpoints.map { $0.stack.count + $0.endpoint.count + 1 }.max() ?? 0
        for e in endpoints {
            let name = "\(e.stack) \(e.endpoint)"
            lines.append("      " + name + String(repeating: " ", count: width - name.count + 2)
                + "\(MetricUnit.formatDuration(e.p50)) / \(MetricUnit.formatDuration(e.p90)) / \(MetricUnit.formatDuration(e.p99))"
                + "  (\(n(Double(e.requests))), \(n(e.failures)) failed)")
        }
        let errors = RunFigures.errors(results)
        if !errors.isEmpty {
            let shown = errors.prefix(5).map { "\($0.stack) \($0.endpoint) \($0.reason) ×\(n($0.count))" }
            lines.append(row("failures", shown.joined(separator: "\n              ") + (errors.count > 5 ? "\n              … \(errors.count - 5) more (dashboard)" : "")))
        }
        /// p50 / p90 / p99 of a latency histogram, and how many it holds of `what`.
        let percentiles = { (h: LogLinearHistogram, what: String) in
            [50.0, 90, 99].map { MetricUnit.formatDuration(Double(h.value(atPercentile: $0))) }.joined(separator: " / ") + "  (\(n(Double(h.totalCount))) \(what))"
        }
        if let metric = results.metric(named: "agent.first_chunk") {
            lines.append(row("agent", "first chunk after an input " + percentiles(results.histogram(metric), "answers")))
        }
        if !results.metrics(named: "bridge.pairings").isEmpty {
            let pairings = results.total(allLabelsOf: "bridge.pairings"), paired = results.total("bridge.pairings", labels: "outcome=ok") ?? 0
            var text = "\(n(paired)) of \(n(pairings)) phones paired with their desktops"
            if let metric = results.metric(named: "bridge.first_chunk") {
                text += "\n              first chunk of an answer " + percentiles(results.histogram(metric), "answers")
            }
            lines.append(row("ai-bridge", text))
        }
        for (kind, readers, unit) in [("dm", "the partner's phone", "messages"), ("group", "each member's phone", "member deliveries")] {
            if let metric = results.metric(named: "chat.delivery_latency", labels: "kind=\(kind)") {
                lines.append(row("chat", "decrypted on \(readers) " + percentiles(results.histogram(metric), unit)))
            }
        }
        for (stack, back) in [("chat", "open and caught up"), ("sync", "their engines restored and synced")] {
            if let metric = results.metric(named: "loadtest.\(stack)_relaunch") {
                lines.append(row("relaunch", "\(stack): killed apps launched again, \(back) after " + percentiles(results.histogram(metric), "relaunches")))
            }
        }
        let lag = results.metric(named: "loadtest.start_lag").map { results.histogram($0) }
        let lagP99 = Double(lag?.value(atPercentile: 99) ?? 0)
        var generator = "CPU \(MetricUnit.decimal(outcome.cpuPercentMean, digits: 0))% of all cores (busiest bucket \(MetricUnit.decimal(outcome.cpuPercentMax, digits: 0))%) "
            + "on \(outcome.loops) event loop\(outcome.loops == 1 ? "" : "s")\(outcome.desktopsOffLoops ? " (the AI bridge desktops on threads of their own)" : ""), "
            + "start lag p99 \(MetricUnit.formatDuration(lagP99))"
        if outcome.cpuPercentMax >= Self.cpuBound / 100 * outcome.loopCapacityPercent || lagP99 >= Self.lagBound {
            generator += "\n      ⚠ the generator was the bottleneck: these figures are generator-bound (more --loops, fewer phones, or shards on more machines)"
        }
        lines.append(row("generator", generator))
        if outcome.thresholds.isEmpty {
            lines.append(row("thresholds", "none set"))
        } else {
            lines.append(row("thresholds", "\(outcome.thresholds.filter(\.passed).count) of \(outcome.thresholds.count) passed"))
            for t in outcome.thresholds { lines.append("      \(t.passed ? "✓" : "✗") \(t.message)") }
        }
        if !skipped.isEmpty {
            lines.append(row("skipped", "\(skipped.count) threshold\(skipped.count == 1 ? "" : "s") on what a load test does not measure: "
                + skipped.map(\.subject).joined(separator: ", ")))
        }
        if !faults.isEmpty {
            let servers = faults.filter(\.actsOnServer).count
            lines.append(row("faults", "\(faults.count) in the scenario, not injected: a load test drives real targets as they are"
                + (servers == 0 ? "" : " (its \(servers) server fault\(servers == 1 ? " plays" : "s play") on the wall clock in `fleetlab serve --faults SCENARIO`)")))
        }
        lines.append(row("results", resultsPath))
        lines.append(row("dashboard", dashboardPath))
        return lines.joined(separator: "\n")
    }

    func row(_ key: String, _ value: String) -> String {
        "  " + key + String(repeating: " ", count: max(1, 12 - key.count)) + value
    }
}
