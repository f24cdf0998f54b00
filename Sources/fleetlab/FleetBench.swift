import ArgumentParser
import Foundation
import LabKernel
import LabStore
import Simulator

/// `fleetlab bench fleet`: the simulator end to end, one stack set at a time on one fixed
/// scenario, each in a process of its own so its memory is its own.
struct FleetBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fleet",
        abstract: "Device-seconds simulated per wall second and memory per device, for each stack alone and the full stack.",
        discussion: """
        SCENARIO (default simulations/bench-fleet.yaml) runs once per stack set, with every \
        population's `stacks` replaced: the device model alone (the reference), workflows, \
        workflows with sync, chat, agent chats, each bridge, workflows with sync and chat, \
        and all of them. Each run is a `fleetlab` process of its own that writes its results \
        to a scratch file, so its peak RSS is its own. Memory per device is the peak RSS over \
        the devices, and the margin over the device model's run (what the stacks add). The \
        target on the 2-core reference machine, for workflows + sync + chat: 10,000 devices \
        x 24 h in 10 minutes, 50 KiB per device (`--devices 10000 --duration 24h`). Build \
        with `swift build -c release`.
        """)

    /// The stack sets, in the order they run.
    static let sets: [(name: String, stacks: Set<StackKind>)] = [
        ("device model", []), ("workflows", [.workflows]), ("workflows + sync", [.workflows, .sync]), ("chat", [.chat]), ("agent", [.agent]),
        ("ai-bridge", [.aiBridge]), ("desktop-bridge", [.desktopBridge]),
        // The stacks of issue 18's target (10,000 phones x 24 h in 10 minutes, 50 KiB each),
        // set before the agent runtime and the bridges joined the full stack.
        ("workflows + sync + chat", [.workflows, .sync, .chat]),
        ("full stack", [.workflows, .sync, .chat, .agent, .aiBridge, .desktopBridge]),
    ]

    @Option(help: "The fixed scenario.")
    var scenario = "simulations/bench-fleet.yaml"

    @Option(help: "Devices (the scenario's populations in proportion).")
    var devices = 2_000

    @Option(help: "Simulated duration.")
    var duration: DurationArgument = DurationArgument(argument: "6h")!

    @Option(help: "Only these stack sets, by name, comma-separated (e.g. 'device model,full stack').")
    var only: String?

    /// Set on the processes this command starts: run one stack set and print its figures.
    @Option(help: .hidden)
    var child: Int?

    @OptionGroup var output: BenchJSON

    func validate() throws {
        guard (1...10_000_000).contains(devices) else { throw ValidationError("--devices must be 1...10000000") }
    }

    func load(_ set: Set<StackKind>) throws -> Scenario {
        var loaded: Scenario
        do {
            loaded = try ScenarioLoader.load(path: scenario).overriding(devices: devices, duration: duration.span)
        } catch {
            throw CLIFailure.badInput("\(error)")
        }
        for index in loaded.devices.indices { loaded.devices[index].stacks = set }
        return loaded
    }

    func run() throws {
        if let child { return try runChild(child) }
        let chosen = only.map { Set($0.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }) }
        if let chosen, let unknown = chosen.first(where: { name in !Self.sets.contains { $0.name == name } }) {
            throw CLIFailure.badInput("no stack set '\(unknown)'; the sets: \(Self.sets.map(\.name).joined(separator: ", "))")
        }
        _ = try load([])  // a bad scenario is reported once, before any run
        try output.check()
        var rows: [JSONValue] = []
        let n = { (v: Double) in MetricUnit.decimal(v, digits: 0) }
        print("fleetlab bench fleet — \(scenario), \(n(Double(devices))) devices × \(duration.span), one process per stack set (\(BuildInfo.description))")
        print("  " + ["stack set".padding(toLength: 23, withPad: " ", startingAt: 0), "wall".leftPad(9), "device-s/wall-s".leftPad(16),
                      "events/s".leftPad(11), "peak RSS".leftPad(11), "per device".leftPad(11), "over model".leftPad(11)].joined(separator: " "))
        var reference: Double?
        var fullRate: Double?
        for (index, set) in Self.sets.enumerated() where chosen?.contains(set.name) ?? true {
            let figures = try measure(index)
            let perDevice = figures.peakRSS / Double(devices)
            if index == 0 { reference = figures.peakRSS }
            let over = reference.map { MetricUnit.formatBytes(max(0, figures.peakRSS - $0) / Double(devices)) } ?? "–"
            let rate = Double(devices) * duration.span.seconds / figures.wallSeconds
            if set.name == "full stack" { fullRate = rate }
            print("  " + [set.name.padding(toLength: 23, withPad: " ", startingAt: 0), MetricUnit.formatDuration(figures.wallSeconds * 1e9).leftPad(9),
                          n(rate).leftPad(16), n(figures.events / figures.wallSeconds).leftPad(11),
                          (MetricUnit.decimal(figures.peakRSS / 1_048_576, digits: 1) + " MiB").leftPad(11),
                          MetricUnit.formatBytes(perDevice).leftPad(11), over.leftPad(11)].joined(separator: " "))
            rows.append(["stack_set": .string(set.name), "wall_seconds": .figure(figures.wallSeconds), "device_seconds_per_wall_second": .figure(rate),
                         "events_per_second": .figure(figures.events / figures.wallSeconds), "peak_rss_bytes": .figure(figures.peakRSS),
                         "bytes_per_device": .figure(perDevice),
                         "bytes_per_device_over_model": reference.map { .figure(max(0, figures.peakRSS - $0) / Double(devices)) } ?? .null])
        }
        if let fullRate {
            let minutes = 10_000 * 86_400 / fullRate / 60
            print("  full stack at this pace: 10,000 devices × 24 h in \(MetricUnit.decimal(minutes, digits: 1)) min (target ≤ 10 min; measure it with --devices 10000 --duration 24h)")
        }
        try output.write(bench: "fleet", parameters: ["scenario": .string(scenario), "devices": .figure(Double(devices)),
                                                   "duration_seconds": .figure(duration.span.seconds)],
                         figures: .array(rows))
        #if DEBUG
        print("  note        this is a debug build; use `swift build -c release` for real figures")
        #endif
    }

    struct Figures: Codable {
        var wallSeconds: Double
        var events: Double
        var peakRSS: Double
    }

    /// Runs stack set `index` in a child process and reads the figures it prints.
    func measure(_ index: Int) throws -> Figures {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: ChildProcess.fleetlab)
        process.arguments = ["bench", "fleet", "--child", String(index), "--scenario", scenario, "--devices", String(devices),
                             "--duration", "\(duration.span.nanoseconds)ns"]
        process.environment = WorkerProcess.tiedEnvironment
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0, let line = String(data: data, encoding: .utf8)?.split(separator: "\n").last,
              let figures = try? JSONDecoder().decode(Figures.self, from: Data(line.utf8)) else {
            throw CLIFailure.badInput("the run of '\(Self.sets[index].name)' failed (exit status \(process.terminationStatus))")
        }
        return figures
    }

    /// The child: one run to a scratch results file; prints its figures as one JSON line.
    func runChild(_ index: Int) throws {
        guard Self.sets.indices.contains(index) else { throw CLIFailure.badInput("no stack set \(index)") }
        let loaded = try load(Self.sets[index].stacks)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("fleetlab-bench-\(ProcessInfo.processInfo.processIdentifier)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let started = WallClock.seconds()
        let outcome = try FleetRun(scenario: loaded, resultsPath: directory.appendingPathComponent("results.sqlite").path).run()
        let figures = Figures(wallSeconds: WallClock.seconds() - started, events: Double(outcome.events),
                              peakRSS: Double(WallClock.peakResidentBytes() ?? 0))
        print(String(decoding: try JSONEncoder().encode(figures), as: UTF8.self))
    }
}
