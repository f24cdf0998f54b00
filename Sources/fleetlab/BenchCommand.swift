import ArgumentParser
import Benchmarks
import DeviceWorkflows
import WorkflowHost
import Orch8Wire
import Foundation
import LabKernel
import LabStore
import Simulator

struct BenchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench",
        abstract: "Measure fleetlab's hot paths against a reference measured in the same run.",
        subcommands: [FleetBench.self, KernelBench.self, EngineBench.self, SyncBench.self, CryptoBench.self, AgentBench.self, LoadBench.self])
}

struct KernelBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "kernel",
        abstract: "Discrete-event kernel versus a bare binary-heap loop on the same event pattern.",
        discussion: """
        The hold model: PENDING timers are armed; each event re-arms one at now + a delay \
        uniform in [1 µs, 10 ms]. Both loops draw the same delays from one seed. Build with \
        `swift build -c release` for meaningful figures.
        """)

    @Option(help: "Events to process per loop.")
    var events: UInt64 = 5_000_000

    @Option(help: "Timers pending at any time.")
    var pending: Int = 10_000

    @Option(help: "Repetitions; the best time of each loop is kept.")
    var repetitions: Int = 3

    @OptionGroup var output: BenchJSON

    func validate() throws {
        guard events > 0, pending > 0, repetitions > 0 else { throw ValidationError("events, pending and repetitions must be positive") }
    }

    func run() throws {
        try output.check()
        let f = KernelBenchmark.run(events: events, pending: pending, repetitions: repetitions, clock: WallClock.seconds)
        let n = { (v: Double) in MetricUnit.decimal(v, digits: 0) }
        print("fleetlab bench kernel — \(n(Double(events))) events, \(n(Double(pending))) pending timers, best of \(repetitions) (\(BuildInfo.description))")
        print("  kernel      \(MetricUnit.decimal(f.kernelEventsPerSecond / 1e6, digits: 2)) M events/s  (\(MetricUnit.decimal(f.kernelSeconds, digits: 3)) s)")
        print("  bare heap   \(MetricUnit.decimal(f.bareEventsPerSecond / 1e6, digits: 2)) M events/s  (\(MetricUnit.decimal(f.bareSeconds, digits: 3)) s)")
        print("  ratio       \(MetricUnit.decimal(f.ratio, digits: 2))× the bare loop's time (target ≤ 1.50×)")
        print("  same work   \(f.kernelChecksum == f.bareChecksum ? "yes" : "NO") (event checksums \(f.kernelChecksum == f.bareChecksum ? "match" : "differ"))")
        try output.write(bench: "kernel", parameters: ["events": .figure(Double(events)), "pending": .figure(Double(pending)), "repetitions": .figure(Double(repetitions))],
                         figures: ["kernel_events_per_second": .figure(f.kernelEventsPerSecond), "bare_events_per_second": .figure(f.bareEventsPerSecond),
                                   "ratio": .figure(f.ratio), "target_ratio": .figure(1.5), "same_work": .bool(f.kernelChecksum == f.bareChecksum)])
        #if DEBUG
        print("  note        this is a debug build; use `swift build -c release` for real figures")
        #endif
    }
}

struct EngineBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "engine",
        abstract: "Workflow engine steps/s: onboarding-flow instances over the in-memory and the SQLite store.",
        discussion: """
        INSTANCES onboarding-flow instances with every wait answered and handlers that return \
        at once run to completion; steps are handler executions. The SQLite store uses WAL \
        and one transaction per tick, on a fresh file each round. Each store runs ROUNDS \
        times, alternating; the best round is the figure, the range shows the spread. \
        Targets on the reference machine: 500,000 steps/s in memory, 20,000 steps/s on \
        SQLite. Build with `swift build -c release`.
        """)

    @Option(help: "Instances per run.")
    var instances = 10_000

    @Option(help: "The onboarding-flow sequence file.")
    var sequence = "simulations/workflows/onboarding-flow.json"

    @Option(help: "Which stores to measure: both, memory or sqlite.")
    var store = "both"

    @Option(help: "Rounds per store; the best is reported.")
    var rounds = 3

    @OptionGroup var output: BenchJSON

    func validate() throws {
        guard instances > 0 && instances <= 1_000_000 else { throw ValidationError("--instances must be 1...1000000") }
        guard (1...20).contains(rounds) else { throw ValidationError("--rounds must be 1...20") }
    }

    func run() throws {
        guard let json = try? String(contentsOfFile: sequence, encoding: .utf8) else {
            throw CLIFailure.badInput("\(sequence): cannot read the onboarding-flow sequence (run from the repository root or pass --sequence)")
        }
        guard ["both", "memory", "sqlite"].contains(store) else { throw CLIFailure.badInput("--store is both, memory or sqlite") }
        try output.check()
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("fleetlab-bench-\(getpid()).sqlite").path
        let removeFile = { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        defer { removeFile() }
        var contenders: [(EngineBenchmark.Contender, target: Double)] = []
        if store != "sqlite" { contenders.append((EngineBenchmark.Contender(name: "in-memory") { InMemoryWorkflowStore() }, 500_000)) }
        if store != "memory" {
            contenders.append((EngineBenchmark.Contender(name: "SQLite (WAL)") {
                removeFile()
                return try SQLiteWorkflowStore(path: path)
            }, 20_000))
        }
        let results = try EngineBenchmark.compare(contenders.map(\.0), rounds: rounds, sequenceJSON: json, instances: instances,
                                                  clock: WallClock.seconds)
        let n = { (v: Double) in MetricUnit.decimal(v, digits: 0) }
        print("fleetlab bench engine — \(n(Double(instances))) onboarding-flow instances, answered waits, zero-duration handlers, "
            + "best of \(rounds) (\(BuildInfo.description))")
        for (result, target) in zip(results, contenders.map(\.target)) {
            let f = result.best
            print("  \(f.store.padding(toLength: 13, withPad: " ", startingAt: 0)) \(n(f.stepsPerSecond)) steps/s  "
                + "(\(n(Double(f.steps))) steps, \(f.ticks) ticks, \(MetricUnit.decimal(f.seconds, digits: 3)) s, "
                + "\(n(Double(f.completed))) completed; rounds \(n(result.slowest))–\(n(result.fastest)))  "
                + "\(MetricUnit.decimal(f.stepsPerSecond / target, digits: 2))× the target of \(n(target))")
        }
        if results.count == 2 {
            print("  SQLite / in-memory  \(MetricUnit.decimal(results[1].fastest / results[0].fastest, digits: 3))")
        }
        try output.write(bench: "engine", parameters: ["instances": .figure(Double(instances)), "rounds": .figure(Double(rounds))],
                         figures: .array(zip(results, contenders.map(\.target)).map { result, target in
                             ["store": .string(result.best.store), "steps_per_second": .figure(result.best.stepsPerSecond),
                              "slowest_round": .figure(result.slowest), "fastest_round": .figure(result.fastest), "target": .figure(target)]
                         }))
        #if DEBUG
        print("  note          this is a debug build; use `swift build -c release` for real figures")
        #endif
    }
}
