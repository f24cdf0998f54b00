import ArgumentParser
import Foundation
import LabKernel
import LabStore
import Live
import Simulator

/// `fleetlab seeds`: one scenario over many seeds, in the spirit of TigerBeetle's VOPR:
/// each seed is a whole run of the model (no results written), several at once, and every
/// seed whose invariants or thresholds fail is printed with the command that replays it.
/// With `--chaos N` each seed also draws N faults of its own (`Scenario.addingChaos`), so
/// the search covers fault schedules nobody wrote, and a failing seed prints its faults.
struct SeedsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "seeds",
        abstract: "Run a scenario over many seeds and report the ones whose invariants or thresholds fail.",
        discussion: """
        Seeds FIRST, FIRST+1, … FIRST+COUNT-1 replace the scenario's seed; JOBS runs go at \
        once (one process each). Nothing is written: a failing seed is replayed with \
        `fleetlab simulate SCENARIO --seed S`, which writes the results and the dashboard.

        With --chaos N, each seed also draws N faults from its own stream (crashes, \
        slowdowns, partitions, radio and push outages, app kills, congested links, of the \
        kinds the scenario can take), after the scenario's own: a search over fault \
        schedules. A failing seed prints the faults it drew; `fleetlab simulate SCENARIO \
        --seed S --chaos N` replays it. With --shrink, each failing seed's drawn faults are \
        cut down to a few that still fail the same check: removing any one of them passes.

        Exit status: 0 every seed passed, 2 bad input, 3 a seed failed.
        """)

    @Argument(help: "A scenario file (YAML).")
    var scenario: String

    @Option(help: "How many seeds.")
    var count = 100

    @Option(help: "The first seed.")
    var first: UInt64 = 1

    @Option(help: "Runs at once (default: the processor count).")
    var jobs = ProcessInfo.processInfo.activeProcessorCount

    @Option(help: "Total devices (overrides the scenario).")
    var devices: Int?

    @Option(help: "Simulated duration (overrides the scenario).")
    var duration: DurationArgument?

    @Option(help: "Faults each seed draws, after the scenario's own (1...20).")
    var chaos: Int?

    @Flag(help: "Judge invariants only: thresholds (latency bounds, say) are not what a search for bugs is after, and drawn faults break them by design.")
    var invariantsOnly = false

    @Flag(help: "With --chaos: cut each failing seed's drawn faults down to those it needs to fail the same check (the first \(SeedsCommand.shrinkLimit) failing seeds).")
    var shrink = false

    /// Set on the processes this command starts: run that one seed and print its verdict.
    @Option(help: .hidden)
    var only: UInt64?

    func validate() throws {
        guard (1...1_000_000).contains(count), (1...64).contains(jobs) else { throw ValidationError("--count 1...1000000, --jobs 1...64") }
        if let devices, devices < 1 || devices > 50_000_000 { throw ValidationError("--devices must be between 1 and 50,000,000") }
        try ChaosOption.validate(chaos)
        if shrink && chaos == nil { throw ValidationError("--shrink cuts down drawn faults: it needs --chaos N") }
    }

    func load(seed: UInt64) throws -> Scenario {
        do {
            let loaded = try ScenarioLoader.load(path: scenario).overriding(devices: devices, duration: duration?.span, seed: seed)
            return chaos.map(loaded.addingChaos) ?? loaded
        } catch {
            throw CLIFailure.badInput("\(error)")
        }
    }

    func run() throws {
        if let only { return try runOne(only) }
        _ = try load(seed: first)  // a bad scenario is reported once, before any run
        let started = WallClock.seconds()
        let seeds = (0..<UInt64(count)).map { first + $0 }
        var failed: [(UInt64, String)] = []
        var done = 0
        var running: [(seed: UInt64, process: Process, output: Pipe)] = []
        var next = seeds.makeIterator()
        func launch() throws -> Bool {
            guard let seed = next.next() else { return false }
            let process = Process()
            process.executableURL = URL(fileURLWithPath: ServerSupervisor.currentExecutable)
            var arguments = ["seeds", scenario, "--only", String(seed)]
            if let devices { arguments += ["--devices", String(devices)] }
            if let duration { arguments += ["--duration", duration.span.description] }
            if let chaos { arguments += ["--chaos", String(chaos)] }
            if invariantsOnly { arguments.append("--invariants-only") }
            process.arguments = arguments
            process.environment = WorkerProcess.tiedEnvironment
            let pipe = Pipe()
            process.standardOutput = pipe
            process.standardError = pipe
            try process.run()
            running.append((seed, process, pipe))
            return true
        }
        for _ in 0..<jobs { guard try launch() else { break } }
        while !running.isEmpty {
            let (seed, process, pipe) = running.removeFirst()
            let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            done += 1
            if process.terminationStatus != 0 {
                let why = output.split(separator: "\n").first { $0.hasPrefix("FAILED") }.map(String.init) ?? "exit status \(process.terminationStatus)"
                failed.append((seed, why))
                Console.error("seed \(seed): \(why)")
            }
            if Console.stderrIsTerminal { FileHandle.standardError.write(Data("\r\(done)/\(count) seeds, \(failed.count) failed".utf8)) }
            _ = try launch()
        }
        let wall = WallClock.seconds() - started
        if Console.stderrIsTerminal { FileHandle.standardError.write(Data("\n".utf8)) }
        print("fleetlab seeds \(scenario) — \(count) seeds from \(first)" + (chaos.map { ", \($0) chaos faults each" } ?? "")
            + (invariantsOnly ? ", invariants only" : "")
            + ", \(jobs) at once, \(MetricUnit.decimal(wall, digits: 1)) s: " + (failed.isEmpty ? "every seed passed" : "\(failed.count) failed"))
        for (rank, (seed, why)) in failed.sorted(by: { $0.0 < $1.0 }).enumerated() {
            print("  seed \(seed): \(why)")
            if let chaos {
                print("    faults drawn:")
                for fault in try load(seed: seed).faults.suffix(chaos) { print("      - \(fault.yaml)") }
            }
            let run = "fleetlab simulate \(scenario) --seed \(seed)" + (devices.map { " --devices \($0)" } ?? "")
                + (duration.map { " --duration \($0.span)" } ?? "")
            print("    reproduce with: \(run)" + ChaosOption.argument(chaos))
            if shrink, let chaos, rank < Self.shrinkLimit {
                let started = WallClock.seconds()
                let (kept, runs) = try cutDown(seed: seed, failure: why, chaos: chaos)
                let took = "\(runs) runs (\(MetricUnit.decimal(WallClock.seconds() - started, digits: 1)) s)"
                if kept.isEmpty {
                    print("    shrunk in \(took): it fails without any drawn fault")
                } else {
                    print("    shrunk to \(kept.count) of the \(chaos) faults in \(took); these alone fail it, and without any one of them it passes:")
                    for fault in kept { print("      - \(fault.yaml)") }
                    print("    replay them: add them to the scenario's faults: and run \(run)")
                }
            }
        }
        if shrink && failed.count > Self.shrinkLimit {
            print("  (shrunk the first \(Self.shrinkLimit) failing seeds; shrink another with --first S --count 1 --shrink)")
        }
        if !failed.isEmpty { throw ExitCode(ExitStatus.checksFailed) }
    }

    /// One seed, in this process: its first failing invariant or threshold, if any.
    func runOne(_ seed: UInt64) throws {
        if let failure = try verdict(try load(seed: seed)) {
            print(failure)
            throw ExitCode(ExitStatus.checksFailed)
        }
        print("passed")
    }

    /// The run's first failing invariant or threshold (`FAILED …`), or nil when it passes.
    func verdict(_ scenario: Scenario) throws -> String? {
        let outcome = try FleetRun(scenario: scenario, resultsPath: nil).run()
        if let row = outcome.invariants.first(where: { !$0.passed }) {
            return "FAILED invariant \(row.name): \(row.firstViolation ?? "") (\(row.violations) of \(row.checks))"
        }
        if !invariantsOnly, let threshold = outcome.thresholds.first(where: { !$0.passed }) {
            return "FAILED threshold \(threshold.metric): \(threshold.message)"
        }
        return nil
    }

    /// How many failing seeds `--shrink` cuts down (each takes a run per fault, or more).
    static let shrinkLimit = 5

    /// The fewest of seed `seed`'s drawn faults that still fail `failure`'s check, greedily:
    /// drop each fault in turn and keep it dropped if the run still fails that check, until
    /// a pass drops none, so removing any one fault left makes the run pass (or fail
    /// another check). A fault's devices do not depend on the others (`FleetWorld.faultLabels`),
    /// so the faults kept, added to the scenario's own, replay exactly.
    func cutDown(seed: UInt64, failure: String, chaos: Int) throws -> (faults: [Fault], runs: Int) {
        let full = try load(seed: seed)
        let own = Array(full.faults.dropLast(chaos))
        let check = failure.split(separator: ":", maxSplits: 1).first.map(String.init) ?? failure
        var kept = Array(full.faults.suffix(chaos))
        var runs = 0
        var dropped = true
        while dropped && !kept.isEmpty {
            dropped = false
            for index in kept.indices.reversed() {
                var trial = full
                trial.faults = own + kept.enumerated().filter { $0.offset != index }.map(\.element)
                runs += 1
                if let why = try verdict(trial), why.hasPrefix(check + ":") {
                    kept.remove(at: index)
                    dropped = true
                }
            }
        }
        return (kept, runs)
    }
}
