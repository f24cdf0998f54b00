import ArgumentParser
import Foundation
import LabKernel
import LabStore
import Reports
import Simulator

/// `fleetlab sweep`: one scenario at several fleet sizes, same seed, to find where latency
/// passes its budget and where each server saturates (a capacity planner's question).
struct SweepCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sweep",
        abstract: "Run a scenario at several fleet sizes and find where latency and server load break.",
        discussion: """
        Each size shares its devices over the scenario's populations in proportion (as \
        `simulate --devices`, chat groups too) and runs with the same seed; its results \
        and dashboard go to OUT/<devices>/, and OUT/sweep.html draws p50/p99 per endpoint \
        and server utilisation against fleet size. The command prints where each \
        endpoint's p99 passes the latency budget and where each server saturates. \
        Thresholds are not a verdict here (a sweep is meant to go past them); invariants \
        are, except the progress checks (a send settles, every member reads within ten \
        minutes, an outbox drains) at sizes where a server is saturated: there they are \
        a finding, the size from which the stack no longer keeps up.

        Exit status: 0 the sweep ran and every invariant held (progress checks below \
        saturation), 2 bad input, 3 an invariant failed, 130 interrupted.
        """)

    @Argument(help: "A scenario file (YAML).")
    var scenario: String

    @Option(help: "Fleet sizes: a list (1000,5000,20000) or a range with a factor (1000..64000x2).")
    var devices: SizeList

    @Option(help: "Simulated duration (overrides the scenario).")
    var duration: DurationArgument?

    @Option(help: "Root seed (overrides the scenario).")
    var seed: UInt64?

    @Option(name: .customLong("latency-budget"), help: "The p99 the findings compare each endpoint with.")
    var latencyBudget: DurationArgument = DurationArgument(argument: "1s")!

    @Option(name: .customLong("error-budget"), help: "The share of each stack's requests that may fail, which the findings compare its failure rate with (1% or 0.01).")
    var errorBudget: String = "1%"

    @Option(help: "Output directory (default: runs/<scenario name>-sweep).")
    var out: String?

    @Flag(help: "No progress bar.")
    var quiet = false

    func run() throws {
        let base: Scenario
        do {
            base = try ScenarioLoader.load(path: scenario).overriding(duration: duration?.span, seed: seed)
        } catch {
            throw CLIFailure.badInput("\(error)")
        }
        guard let errors = MetricUnit.share.parseBound(errorBudget), errors > 0, errors < 1 else {
            throw CLIFailure.badInput("--error-budget \(errorBudget): expected a share of the requests between 0 and 100 %, like 1% or 0.01")
        }
        let directory = out ?? "runs/\(base.name)-sweep"
        try OutputPaths.prepareDirectory(directory)
        Interrupt.install()
        let sizes = devices.sizes
        var points: [SweepPoint] = []
        for (index, size) in sizes.enumerated() {
            let point = base.overriding(devices: size)
            let folder = (directory as NSString).appendingPathComponent(String(size))
            try OutputPaths.prepareDirectory(folder)
            let resultsPath = (folder as NSString).appendingPathComponent("results.sqlite")
            let bar = ProgressBar(enabled: !quiet, label: "\(index + 1)/\(sizes.count) · \(MetricUnit.decimal(Double(size), digits: 0)) devices")
            let started = WallClock.seconds()
            let outcome = try FleetRun.runFromCommand(point, resultsPath: resultsPath, bar: bar)
            let results = try ResultsDatabase.open(at: resultsPath).load()
            try OutputPaths.write(Dashboard.render(results), to: (folder as NSString).appendingPathComponent("dashboard.html"))
            let figures = SweepPoint(devices: size, resultsPath: resultsPath, results: results, wallSeconds: WallClock.seconds() - started)
            points.append(figures)
            print(Self.line(figures, interrupted: outcome.interrupted))
            fflush(nil)  // each point as it ends, also into a log
            if outcome.interrupted { break }
        }
        let page = (directory as NSString).appendingPathComponent("sweep.html")
        let budget = Double(latencyBudget.span.nanoseconds)
        let progress = InvariantLedger.progressChecks
        try OutputPaths.write(SweepDashboard.render(scenario: base.name, seed: base.seed, points: points, bound: budget, errorBudget: errors,
                                                    progressChecks: progress), to: page)
        print("")
        for finding in SweepAnalysis.findings(points, bound: budget, errorBudget: errors, progressChecks: progress) { print("  " + finding) }
        print("  sweep dashboard: \(page)")
        if Interrupt.isRequested { throw ExitCode(ExitStatus.interrupted) }
        if !SweepAnalysis.verdicts(points, progressChecks: progress).isEmpty { throw ExitCode(ExitStatus.checksFailed) }
    }

    /// One point as a line: its size, wall time, the slowest endpoint and each server's load.
    static func line(_ point: SweepPoint, interrupted: Bool) -> String {
        var parts = ["\(MetricUnit.decimal(Double(point.devices), digits: 0)) devices", "\(MetricUnit.formatDuration(point.wallSeconds * 1e9)) wall"]
        if let slowest = point.endpoints.max(by: { $0.p99 < $1.p99 }) {
            parts.append("slowest p99 \(MetricUnit.formatDuration(slowest.p99)) (\(slowest.stack) \(slowest.endpoint))")
        }
        if let failed = SweepAnalysis.failureRate(point) { parts.append("\(MetricUnit.share.format(failed)) of requests failed") }
        for server in point.servers {
            parts.append("\(server.stack) server busiest \(SweepAnalysis.percent(server.peakUtilisation))")
        }
        if !point.invariantsHeld { parts.append("failed: " + point.violated.joined(separator: ", ")) }
        if interrupted { parts.append("interrupted") }
        return "  " + parts.joined(separator: " · ")
    }
}

/// `--devices 1000,5000,20000` or `--devices 1000..64000x2`.
struct SizeList: ExpressibleByArgument {
    var sizes: [Int]

    init?(argument: String) {
        if let range = argument.split(separator: "x").first, argument.contains(".."), argument.split(separator: "x").count == 2,
           let factor = Double(argument.split(separator: "x")[1]), factor > 1 {
            let ends = range.components(separatedBy: "..")
            guard ends.count == 2, let low = Int(ends[0]), let high = Int(ends[1]), low >= 1, high >= low, high <= 50_000_000 else { return nil }
            var sizes: [Int] = []
            var size = Double(low)
            while Int(size.rounded()) <= high && sizes.count < 64 {
                sizes.append(Int(size.rounded()))
                size *= factor
            }
            if sizes.last != high && sizes.count < 64 { sizes.append(high) }
            self.sizes = sizes
        } else {
            let parts = argument.split(separator: ",", omittingEmptySubsequences: false)
            let sizes = parts.compactMap { Int($0.trimmingCharacters(in: .whitespaces)) }
            guard sizes.count == parts.count, !sizes.isEmpty, sizes.allSatisfy({ (1...50_000_000).contains($0) }),
                  sizes.count <= 64 else { return nil }
            self.sizes = Array(Set(sizes)).sorted()
        }
    }

    static var defaultCompletionKind: CompletionKind { .default }
}
