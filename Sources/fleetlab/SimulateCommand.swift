import ArgumentParser
import Foundation
import LabKernel
import LabStore
import Reports
import Simulator

struct SimulateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "simulate",
        abstract: "Run a scenario in virtual time and write results.sqlite and dashboard.html.",
        discussion: """
        The run depends only on the scenario, the seed and the build: the same three give \
        the same results database (all but its `run` table of wall-clock facts).

        Exit status: 0 all thresholds and invariants held, 2 bad input, 3 a threshold or \
        invariant failed, 130 interrupted (results up to the stop are still written).
        """)

    @Argument(help: "A scenario file (YAML), e.g. simulations/smoke.yaml.")
    var scenario: String

    @Option(help: "Total devices, shared over the scenario's populations in proportion.")
    var devices: Int?

    @Option(help: "Simulated duration, e.g. 30m, 6h, 2d (overrides the scenario).")
    var duration: DurationArgument?

    @Option(help: "Root seed (overrides the scenario).")
    var seed: UInt64?

    @Option(help: "Output directory (default: runs/<scenario name>).")
    var out: String?

    @Option(help: "Add this many faults, drawn from the seed, after the scenario's own (1...20; see `fleetlab seeds --chaos`).")
    var chaos: Int?

    @Flag(help: "No progress bar.")
    var quiet = false

    @Option(help: "Run one slice of the fleet, I/N (0-based): members whose number is I modulo N. Merge the shards with `fleetlab merge`.")
    var shard: String?

    @Option(help: "Write thresholds and invariants as JUnit XML to this file.")
    var junit: String?

    @Option(help: "Write the summary as JSON to this file.")
    var json: String?

    func validate() throws {
        if let devices, devices < 1 || devices > 50_000_000 {
            throw ValidationError("--devices must be between 1 and 50,000,000")
        }
        try ChaosOption.validate(chaos)
    }

    func run() throws {
        var loaded: Scenario
        do {
            loaded = try ScenarioLoader.load(path: scenario)
        } catch {
            throw CLIFailure.badInput("\(error)")
        }
        loaded = loaded.overriding(devices: devices, duration: duration?.span, seed: seed)
        if let chaos { loaded = loaded.addingChaos(chaos) }
        if let shard {
            guard let slice = FleetShard(parsing: shard) else { throw CLIFailure.badInput("--shard \(shard): expected I/N with 0 <= I < N, like 0/4") }
            guard !loaded.runs(.chat) else {
                throw CLIFailure.badInput("--shard: this scenario runs chat, whose groups span phones of every shard; sharded runs take workflows and sync")
            }
            loaded.shard = slice
        }
        let directory = out ?? "runs/\(loaded.name)" + (loaded.shard.map { "-shard-\($0.index)-of-\($0.count)" } ?? "")
        try OutputPaths.prepareDirectory(directory)
        let resultsPath = (directory as NSString).appendingPathComponent("results.sqlite")
        let dashboardPath = (directory as NSString).appendingPathComponent("dashboard.html")
        for file in [junit, json].compactMap({ $0 }) { try OutputPaths.checkWritableFile(file) }

        Interrupt.install()
        let bar = ProgressBar(enabled: !quiet)
        let outcome = try FleetRun.runFromCommand(loaded, resultsPath: resultsPath, bar: bar)

        let results = try ResultsDatabase.open(at: resultsPath).load()
        try OutputPaths.write(Dashboard.render(results), to: dashboardPath)
        let digest = try ResultsDigest.compute(ResultsDatabase.open(at: resultsPath))
        let summary = RunSummary(scenarioPath: scenario, scenario: loaded, outcome: outcome, results: results,
                                 resultsPath: resultsPath, dashboardPath: dashboardPath, digest: digest).text
        print(summary)
        if let junit {
            let report = JUnitReport.run(results, wallSeconds: outcome.wallSeconds, timestamp: String(WallClock.timestamp().prefix(19)), summary: summary)
            try OutputPaths.write(report.xml, to: junit)
        }
        if let json {
            let passed = outcome.passed && !outcome.interrupted
            try OutputPaths.write(SummaryJSON.run(results, digest: digest, passed: passed, interrupted: outcome.interrupted).prettyText + "\n", to: json)
        }
        if outcome.interrupted { throw ExitCode(ExitStatus.interrupted) }
        if !outcome.passed { throw ExitCode(ExitStatus.checksFailed) }
    }
}
