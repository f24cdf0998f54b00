import ArgumentParser
import Foundation
import LabKernel
import LabStore
import LoadTest
import Simulator

/// `fleetlab bench loadtest`: fleetlab's load generator beside Locust, the same sync
/// requests against one `fleetlab serve` on loopback, in requests per generator CPU-second.
struct LoadBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "loadtest",
        abstract: "fleetlab's load generator against Locust's FastHttpUser: requests per generator CPU-second, same server, same requests.",
        discussion: """
        Starts `fleetlab serve`, then at each point (a THINK between syncs) runs `fleetlab \
        loadtest` (USERS phones, DURATION) and Locust headless with scripts/locust/sync_user.py \
        (the same users, think time, registration and sync body), one after the other. The \
        default points are a light load (10ms) and Locust at its ceiling of one core (1ms). \
        Each generator's CPU is its own process's (user and system); requests are those \
        answered. A third row, the reference, sends the same requests from the leanest \
        client NIO allows (no phone, no recording): what any NIO generator pays for the \
        socket path on this machine. \
        scripts/bench-loadtest installs Locust into .venv-bench and runs this. Target: 3x \
        Locust's requests per CPU-second.
        """)

    @Option(help: "Virtual users (phones) in each generator.")
    var users = 64

    @Option(help: "Wait between a user's requests; each one given is an operating point of its own (default: 10ms, then 1ms).")
    var think: [DurationArgument] = []

    @Option(help: "How long each generator runs at each point.")
    var duration: DurationArgument = DurationArgument(span: .seconds(20))

    @Option(help: "Rounds at each point: the three generators take turns, and each one's median round is its figure (Locust's varies by a third between runs).")
    var rounds = 1

    @Option(help: "The locust executable (default: .venv-bench/bin/locust, else locust on PATH).")
    var locust: String?

    /// Set on the process this command starts for the reference row: run the bare NIO
    /// client against this URL (key in FLEETLAB_KEY_SYNC) and print its figures.
    @Option(help: .hidden)
    var bareChild: String?

    @OptionGroup var output: BenchJSON

    /// The two points of the bench: a light load (both generators mostly idle between
    /// requests), and one where a Locust process is at its ceiling of about one core.
    static let defaultThinks: [TimeSpan] = [.milliseconds(10), .milliseconds(1)]

    func validate() throws {
        guard (1...10_000).contains(users) else { throw ValidationError("--users must be 1...10000") }
        guard duration.span >= .seconds(2), duration.span <= .minutes(30) else { throw ValidationError("--duration must be 2s...30m") }
        guard (1...9).contains(rounds) else { throw ValidationError("--rounds must be 1...9") }
    }

    /// A generator's rounds at one point: the median round (by requests per CPU-second)
    /// stands for it; the spread says how far the rounds were apart.
    struct Rounds {
        var all: [Figures]
        var median: Figures { all.sorted { $0.perCPUSecond < $1.perCPUSecond }[all.count / 2] }
        var spread: String {
            guard all.count > 1, let low = all.map(\.perCPUSecond).min(), let high = all.map(\.perCPUSecond).max() else { return "" }
            return "; \(all.count) rounds \(MetricUnit.decimal(low, digits: 0))–\(MetricUnit.decimal(high, digits: 0))"
        }
    }

    /// One generator's figures at one point.
    struct Figures {
        var requests: Double
        var cpuSeconds: Double
        var wallSeconds: Double
        var failures: Double
        var p50: String
        var p99: String
        var perCPUSecond: Double { cpuSeconds > 0 ? requests / cpuSeconds : 0 }
    }

    /// Figures a child generator reported as JSON (`requests`, `failures`, `cpu_seconds`,
    /// `wall_seconds`): the Locust script's report and the bare client's line alike.
    static func reported(_ json: JSONValue, p50: String, p99: String) -> Figures {
        Figures(requests: json["requests"]?.numberValue ?? 0, cpuSeconds: json["cpu_seconds"]?.numberValue ?? 0,
                wallSeconds: json["wall_seconds"]?.numberValue ?? 0, failures: json["failures"]?.numberValue ?? 0, p50: p50, p99: p99)
    }

    func run() throws {
        if let bareChild { return try runBare(bareChild) }
        try output.check()
        guard let locustPath = locust ?? Self.findLocust() else {
            throw CLIFailure.badInput("Locust not found: scripts/bench-loadtest installs it into .venv-bench, or pass --locust PATH")
        }
        guard FileManager.default.fileExists(atPath: "scripts/locust/sync_user.py"), FileManager.default.fileExists(atPath: "simulations/bench-loadtest.yaml") else {
            throw CLIFailure.badInput("run from the repository root (scripts/locust/sync_user.py and simulations/bench-loadtest.yaml)")
        }
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("fleetlab-bench-loadtest-\(getpid())").path
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let server = try ServedSync.start(data: (scratch as NSString).appendingPathComponent("serve"))
        defer { server.stop() }
        let seconds = Int(duration.span.seconds.rounded(.up))
        let thinks = think.isEmpty ? Self.defaultThinks : think.map(\.span)
        let n = { (v: Double) in MetricUnit.decimal(v, digits: 0) }

        let each = rounds == 1 ? "" : ", \(rounds) rounds taking turns (each generator's median round shown)"
        print("fleetlab bench loadtest — \(users) users, \(seconds) s per generator and point\(each), against fleetlab serve's sync server (\(BuildInfo.description))")
        print("  think  generator  requests      req/s   CPU-s  req per CPU-s   p50 / p99")
        var points: [JSONValue] = []
        for (index, wait) in thinks.enumerated() {
            var runs = (ours: Rounds(all: []), bare: Rounds(all: []), theirs: Rounds(all: []))
            for round in 0..<rounds {
                let tag = "\(index)-\(round)"
                runs.ours.all.append(try fleetlab(server: server, think: wait, seconds: seconds, out: (scratch as NSString).appendingPathComponent("fleetlab-\(tag)")))
                runs.bare.all.append(try bare(server: server, think: wait, seconds: seconds))
                runs.theirs.all.append(try locust(locustPath, server: server, think: wait, seconds: seconds,
                                                  report: (scratch as NSString).appendingPathComponent("locust-\(tag).json")))
            }
            let (ours, bare, theirs) = (runs.ours.median, runs.bare.median, runs.theirs.median)
            let ratio = theirs.perCPUSecond > 0 ? ours.perCPUSecond / theirs.perCPUSecond : 0
            let bareRatio = theirs.perCPUSecond > 0 ? bare.perCPUSecond / theirs.perCPUSecond : 0
            let label = "\(wait)".leftPad(5)
            for (name, f, note, spread) in [("fleetlab", ours, "from the intended start", runs.ours.spread),
                                            ("bare NIO", bare, "the reference: no phone, nothing recorded", runs.bare.spread),
                                            ("Locust", theirs, "from the send", runs.theirs.spread)] {
                print("  \(name == "fleetlab" ? label : "     ")  \(name.padding(toLength: 9, withPad: " ", startingAt: 0))  \(n(f.requests).leftPad(8))  "
                    + "\(n(f.requests / max(f.wallSeconds, 1e-9)).leftPad(9))  \(MetricUnit.decimal(f.cpuSeconds, digits: 2).leftPad(6))  \(n(f.perCPUSecond).leftPad(13))   "
                    + "\(f.p50) / \(f.p99)  (\(note); \(n(f.failures)) failed\(spread))")
            }
            print("         ratio      \(MetricUnit.decimal(ratio, digits: 2))× Locust's requests per CPU-second (target ≥ 3×); "
                + "the bare NIO client \(MetricUnit.decimal(bareRatio, digits: 2))×, fleetlab \(MetricUnit.decimal(bare.perCPUSecond > 0 ? ours.perCPUSecond / bare.perCPUSecond : 0, digits: 2))× of it")
            points.append(["think_seconds": .figure(wait.seconds), "fleetlab_requests": .figure(ours.requests), "fleetlab_cpu_seconds": .figure(ours.cpuSeconds),
                           "fleetlab_requests_per_cpu_second": .figure(ours.perCPUSecond), "locust_requests": .figure(theirs.requests),
                           "locust_cpu_seconds": .figure(theirs.cpuSeconds), "locust_requests_per_cpu_second": .figure(theirs.perCPUSecond),
                           "bare_nio_requests": .figure(bare.requests), "bare_nio_cpu_seconds": .figure(bare.cpuSeconds),
                           "bare_nio_requests_per_cpu_second": .figure(bare.perCPUSecond), "bare_nio_ratio": .figure(bareRatio),
                           "ratio": .figure(ratio),
                           "rounds": ["fleetlab": .array(runs.ours.all.map { .figure($0.perCPUSecond) }),
                                      "bare_nio": .array(runs.bare.all.map { .figure($0.perCPUSecond) }),
                                      "locust": .array(runs.theirs.all.map { .figure($0.perCPUSecond) })]])
        }
        #if DEBUG
        print("  note       this is a debug build; use `swift build -c release` for real figures")
        #endif
        try output.write(bench: "loadtest", parameters: ["users": .figure(Double(users)), "duration_seconds": .figure(Double(seconds)), "rounds": .figure(Double(rounds)),
                                                         "think_seconds": .array(thinks.map { .figure($0.seconds) })],
                         figures: ["points": .array(points), "target_ratio": .figure(3)])
    }

    /// fleetlab's generator at one point: requests answered, and its process's CPU over the run.
    func fleetlab(server: ServedSync, think: TimeSpan, seconds: Int, out: String) throws -> Figures {
        let run = try ChildProcess.run(ChildProcess.fleetlab, ["loadtest", "simulations/bench-loadtest.yaml", "--target", "sync=\(server.url)",
                                                        "--duration", "\(seconds)s", "--devices", String(users), "--think", "\(think.nanoseconds)ns",
                                                        "--out", out, "--quiet"],
                                       environment: ["FLEETLAB_KEY_SYNC": server.key], timeout: Double(seconds) + 60)
        guard run.status == 0 || run.status == 3 else { throw CLIFailure(message: "fleetlab loadtest failed (\(run.status)): \(run.stderr)", status: 1) }
        let results = try ResultsDatabase.open(at: (out as NSString).appendingPathComponent("results.sqlite")).load()
        let cores = Double(ProcessInfo.processInfo.activeProcessorCount)
        let wall = Double(results.runMetadata["wall_seconds"] ?? "") ?? 0
        let sync = results.metric(named: "http.latency", labels: "endpoint=POST /api/v1/mobile/sync,stack=sync").map { results.histogram($0) }
        return Figures(requests: Double(results.metrics(named: "http.latency").reduce(UInt64(0)) { $0 + results.histogram($1).totalCount }),
                       cpuSeconds: (Double(results.runMetadata["generator_cpu_percent"] ?? "") ?? 0) / 100 * cores * wall, wallSeconds: wall,
                       failures: results.total(allLabelsOf: "http.failures"),
                       p50: MetricUnit.formatDuration(Double(sync?.value(atPercentile: 50) ?? 0)),
                       p99: MetricUnit.formatDuration(Double(sync?.value(atPercentile: 99) ?? 0)))
    }

    /// The bare NIO client at the same point, in a process of its own (its CPU is its own).
    func bare(server: ServedSync, think: TimeSpan, seconds: Int) throws -> Figures {
        let run = try ChildProcess.run(ChildProcess.fleetlab, ["bench", "loadtest", "--bare-child", server.url, "--users", String(users),
                                                        "--think", "\(think.nanoseconds)ns", "--duration", "\(seconds)s"],
                                       environment: ["FLEETLAB_KEY_SYNC": server.key], timeout: Double(seconds) + 60)
        guard run.status == 0, let line = run.stdout.split(separator: "\n").last, let figures = try? JSONValue.parse(String(line)) else {
            throw CLIFailure(message: "the bare NIO client failed (\(run.status)): \(run.stderr.suffix(2_000))", status: 1)
        }
        return Self.reported(figures, p50: "—", p99: "—")
    }

    /// The child side of `bare(server:think:seconds:)`: one run, its figures as one JSON line.
    func runBare(_ url: String) throws {
        guard let key = ProcessInfo.processInfo.environment["FLEETLAB_KEY_SYNC"] else { throw CLIFailure.badInput("FLEETLAB_KEY_SYNC is not set") }
        let figures = try BareSyncClient.run(baseURL: url, apiKey: key, users: users, think: think.first?.span ?? Self.defaultThinks[0], duration: duration.span)
        let line: JSONValue = ["requests": .figure(Double(figures.requests)), "failures": .figure(Double(figures.failures)),
                               "cpu_seconds": .figure(figures.cpuSeconds), "wall_seconds": .figure(figures.wallSeconds)]
        print(line.canonicalText)
    }

    /// Locust at the same point, the same users and think time.
    func locust(_ path: String, server: ServedSync, think: TimeSpan, seconds: Int, report: String) throws -> Figures {
        let run = try ChildProcess.run(path, ["-f", "scripts/locust/sync_user.py", "--headless", "-u", String(users), "-r", String(users),
                                              "-t", "\(seconds)s", "--host", server.url, "--only-summary", "--loglevel", "WARNING"],
                                       environment: ["FLEETLAB_KEY_SYNC": server.key, "FLEETLAB_BENCH_THINK": String(think.seconds),
                                                     "FLEETLAB_BENCH_OUT": report],
                                       timeout: Double(seconds) + 60)
        guard let data = FileManager.default.contents(atPath: report), let figures = try? JSONValue.parse(String(decoding: data, as: UTF8.self)) else {
            throw CLIFailure(message: "Locust wrote no figures (exit \(run.status)): \(run.stderr.suffix(2_000))", status: 1)
        }
        return Self.reported(figures, p50: MetricUnit.decimal(figures["p50_ms"]?.numberValue ?? 0, digits: 1) + "ms",
                             p99: MetricUnit.decimal(figures["p99_ms"]?.numberValue ?? 0, digits: 1) + "ms")
    }

    static func findLocust() -> String? {
        if FileManager.default.isExecutableFile(atPath: ".venv-bench/bin/locust") { return ".venv-bench/bin/locust" }
        for dir in (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":") {
            let candidate = "\(dir)/locust"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return nil
    }
}

/// A child process run to its end with a deadline, its output captured.
enum ChildProcess {
    /// This fleetlab executable, for the benches' child processes.
    static var fleetlab: String {
        let path = URL(fileURLWithPath: CommandLine.arguments[0]).standardizedFileURL.path
        return FileManager.default.isExecutableFile(atPath: path) ? path : (Bundle.main.executablePath ?? path)
    }

    struct Result {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    static func run(_ executable: String, _ arguments: [String], environment: [String: String], timeout: Double) throws -> Result {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.environment = WorkerProcess.tiedEnvironment.merging(environment) { $1 }
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let group = DispatchGroup()
        nonisolated(unsafe) var outData = Data(), errData = Data()
        group.enter()
        DispatchQueue.global().async { outData = out.fileHandleForReading.readDataToEndOfFile(); group.leave() }
        group.enter()
        DispatchQueue.global().async { errData = err.fileHandleForReading.readDataToEndOfFile(); group.leave() }
        if group.wait(timeout: .now() + timeout) == .timedOut {
            process.terminate()
            throw CLIFailure(message: "\(executable) did not finish within \(Int(timeout)) s", status: 1)
        }
        process.waitUntilExit()
        return Result(status: process.terminationStatus, stdout: String(decoding: outData, as: UTF8.self), stderr: String(decoding: errData, as: UTF8.self))
    }
}

/// `fleetlab serve` as a child process with its sync server's URL and root key.
final class ServedSync {
    let process: Process
    let url: String
    let key: String

    init(process: Process, url: String, key: String) {
        self.process = process
        self.url = url
        self.key = key
    }

    static func start(data: String) throws -> ServedSync {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: ChildProcess.fleetlab)
        process.arguments = ["serve", "--data", data, "--port", "host=0", "--port", "mobile-sync=0", "--without", "chat", "--without", "agent-runtime",
                             "--without", "ai-bridge", "--without", "desktop-bridge"]
        process.environment = WorkerProcess.tiedEnvironment
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
        var text = ""
        let deadline = Date().addingTimeInterval(30)
        while !text.contains("root API key:"), Date() < deadline {
            let chunk = out.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            text += String(decoding: chunk, as: UTF8.self)
        }
        let words = text.split(whereSeparator: { $0 == " " || $0 == "\n" }).map(String.init)
        guard let line = text.split(separator: "\n").first(where: { $0.contains("mobile-sync") && $0.contains("http://") }),
              let url = line.split(separator: " ").first(where: { $0.hasPrefix("http://") }).map(String.init),
              let key = words.first(where: { $0.hasPrefix("fl_root_") }) else {
            process.terminate()
            throw CLIFailure(message: "fleetlab serve did not come up: \(text)", status: 1)
        }
        return ServedSync(process: process, url: url, key: key)
    }

    func stop() {
        guard process.isRunning else { return }
        process.terminate()
        process.waitUntilExit()
    }
}
