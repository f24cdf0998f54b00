import ArgumentParser
import LabStore
import Simulator

struct BenchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench",
        abstract: "Measure fleetlab's hot paths against a reference measured in the same run.",
        subcommands: [KernelBench.self])
}

struct KernelBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "kernel",
        abstract: "Discrete-event kernel versus a bare binary-heap loop on the same event pattern.",
        discussion: """
        The hold model: PENDING timers are armed; each event re-arms one at now + a delay
        uniform in [1 µs, 10 ms]. Both loops draw the same delays from one seed. Build with
        `swift build -c release` for meaningful figures.
        """)

    @Option(help: "Events to process per loop.")
    var events: UInt64 = 5_000_000

    @Option(help: "Timers pending at any time.")
    var pending: Int = 10_000

    @Option(help: "Repetitions; the best time of each loop is kept.")
    var repetitions: Int = 3

    func validate() throws {
        guard events > 0, pending > 0, repetitions > 0 else { throw ValidationError("events, pending and repetitions must be positive") }
    }

    func run() throws {
        let f = KernelBenchmark.run(events: events, pending: pending, repetitions: repetitions, clock: WallClock.seconds)
        let n = { (v: Double) in MetricUnit.decimal(v, digits: 0) }
        print("fleetlab bench kernel — \(n(Double(events))) events, \(n(Double(pending))) pending timers, best of \(repetitions) (\(BuildInfo.description))")
        print("  kernel      \(MetricUnit.decimal(f.kernelEventsPerSecond / 1e6, digits: 2)) M events/s  (\(MetricUnit.decimal(f.kernelSeconds, digits: 3)) s)")
        print("  bare heap   \(MetricUnit.decimal(f.bareEventsPerSecond / 1e6, digits: 2)) M events/s  (\(MetricUnit.decimal(f.bareSeconds, digits: 3)) s)")
        print("  ratio       \(MetricUnit.decimal(f.ratio, digits: 2))× the bare loop's time (target ≤ 1.50×)")
        print("  same work   \(f.kernelChecksum == f.bareChecksum ? "yes" : "NO") (event checksums \(f.kernelChecksum == f.bareChecksum ? "match" : "differ"))")
        #if DEBUG
        print("  note        this is a debug build; use `swift build -c release` for real figures")
        #endif
    }
}
