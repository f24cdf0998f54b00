import ArgumentParser
import Foundation
import LabKernel
import LabStore
import Simulator

/// `fleetlab bench loadtest`: fleetlab's load generator beside Locust, the same sync
/// requests against one `fleetlab serve` on loopback, in requests per generator CPU-second.
struct LoadBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "loadtest",
        abstract: "fleetlab's load generator against Locust's FastHttpUser: requests per generator CPU-second, same server, same requests.",
        discussion: """
        Starts `fleetlab serve`, then runs `fleetlab loadtest` (USERS phones, THINK between \
        syncs, DURATION) and Locust headless with scripts/locust/sync_user.py (the same users, \
        think time, registration and sync body), one after the other. Each generator's CPU \
        is its own process's (user and system); requests are those answered. \
        scripts/bench-loadtest installs Locust into .venv-bench and runs this. Target: 3x \
        Locust's requests per CPU-second.
        """)

    @Option(help: "Virtual users (phones) in each generator.")
    var users = 64

    @Option(help: "Wait between a user's requests.")
    var think: DurationArgument = DurationArgument(span: .milliseconds(10))

    @Option(help: "How long each generator runs.")
    var duration: DurationArgument = DurationArgument(span: .seconds(20))

    @Option(help: "The locust executable (default: .venv-bench/bin/locust, else locust on PATH).")
    var locust: String?

    @OptionGroup var output: BenchJSON

    func validate() throws {
        guard (1...10_000).contains(users) else { throw ValidationError("--users must be 1...10000") }
        guard duration.span >= .seconds(2), duration.span <= .minutes(30) else { throw ValidationError("--duration must be 2s...30m") }
    }

    func run() throws {
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

        // fleetlab's generator.
        let out = (scratch as NSString).appendingPathComponent("fleetlab")
        let ours = try ChildProcess.run(ChildProcess.fleetlab, ["loadtest", "simulations/bench-loadtest.yaml", "--target", "sync=\(server.url)",
                                                         "--duration", "\(seconds)s", "--devices", String(users), "--think", "\(think.span.nanoseconds)ns",
                                                         "--out", out, "--quiet"],
                                        environment: ["FLEETLAB_KEY_SYNC": server.key], timeout: duration.span.seconds + 60)
        guard ours.status == 0 || ours.status == 3 else { throw CLIFailure(message: "fleetlab loadtest failed (\(ours.status)): \(ours.stderr)", status: 1) }
        let results = try ResultsDatabase.open(at: (out as NSString).appendingPathComponent("results.sqlite")).load()
        let cores = Double(ProcessInfo.processInfo.activeProcessorCount)
        let wall = Double(results.runMetadata["wall_seconds"] ?? "") ?? 0
        let fleetlabCPU = (Double(results.runMetadata["generator_cpu_percent"] ?? "") ?? 0) / 100 * cores * wall
        let sync = results.metric(named: "http.latency", labels: "endpoint=POST /api/v1/mobile/sync,stack=sync").map { results.histogram($0) }
        let fleetlabRequests = Double(results.metrics(named: "http.latency").reduce(UInt64(0)) { $0 + results.histogram($1).totalCount })
        let fleetlabFailures = results.total(allLabelsOf: "http.failures")

        // Locust, the same users and think time.
        let report = (scratch as NSString).appendingPathComponent("locust.json")
        let theirs = try ChildProcess.run(locustPath, ["-f", "scripts/locust/sync_user.py", "--headless", "-u", String(users), "-r", String(users),
                                                       "-t", "\(seconds)s", "--host", server.url, "--only-summary", "--loglevel", "WARNING"],
                                          environment: ["FLEETLAB_KEY_SYNC": server.key, "FLEETLAB_BENCH_THINK": String(think.span.seconds),
                                                        "FLEETLAB_BENCH_OUT": report],
                                          timeout: duration.span.seconds + 60)
        guard let data = FileManager.default.contents(atPath: report), let locustFigures = try? JSONValue.parse(String(decoding: data, as: UTF8.self)) else {
            throw CLIFailure(message: "Locust wrote no figures (exit \(theirs.status)): \(theirs.stderr.suffix(2_000))", status: 1)
        }
        let locustRequests = locustFigures["requests"]?.numberValue ?? 0
        let locustCPU = locustFigures["cpu_seconds"]?.numberValue ?? 0
        let locustWall = locustFigures["wall_seconds"]?.numberValue ?? 0

        let ourRate = fleetlabCPU > 0 ? fleetlabRequests / fleetlabCPU : 0
        let theirRate = locustCPU > 0 ? locustRequests / locustCPU : 0
        let n = { (v: Double) in MetricUnit.decimal(v, digits: 0) }
        print("fleetlab bench loadtest — \(users) users, think \(think.span), \(seconds) s each, against fleetlab serve's sync server (\(BuildInfo.description))")
        print("  generator  requests      req/s   CPU-s  req per CPU-s   p50 / p99")
        print("  fleetlab   \(n(fleetlabRequests).leftPad(8))  \(n(fleetlabRequests / max(wall, 1e-9)).leftPad(9))  \(MetricUnit.decimal(fleetlabCPU, digits: 2).leftPad(6))  "
            + "\(n(ourRate).leftPad(13))   \(MetricUnit.formatDuration(Double(sync?.value(atPercentile: 50) ?? 0))) / \(MetricUnit.formatDuration(Double(sync?.value(atPercentile: 99) ?? 0)))"
            + "  (from the intended start; \(n(fleetlabFailures)) failed)")
        print("  Locust     \(n(locustRequests).leftPad(8))  \(n(locustRequests / max(locustWall, 1e-9)).leftPad(9))  \(MetricUnit.decimal(locustCPU, digits: 2).leftPad(6))  "
            + "\(n(theirRate).leftPad(13))   \(MetricUnit.decimal(locustFigures["p50_ms"]?.numberValue ?? 0, digits: 1))ms / \(MetricUnit.decimal(locustFigures["p99_ms"]?.numberValue ?? 0, digits: 1))ms"
            + "  (from the send; \(n(locustFigures["failures"]?.numberValue ?? 0)) failed)")
        let ratio = theirRate > 0 ? ourRate / theirRate : 0
        print("  ratio      \(MetricUnit.decimal(ratio, digits: 2))× Locust's requests per CPU-second (target ≥ 3×)")
        #if DEBUG
        print("  note       this is a debug build; use `swift build -c release` for real figures")
        #endif
        try output.write(bench: "loadtest", parameters: ["users": .figure(Double(users)), "think_seconds": .figure(think.span.seconds),
                                                         "duration_seconds": .figure(Double(seconds))],
                         figures: ["fleetlab_requests": .figure(fleetlabRequests), "fleetlab_cpu_seconds": .figure(fleetlabCPU),
                                   "fleetlab_requests_per_cpu_second": .figure(ourRate), "locust_requests": .figure(locustRequests),
                                   "locust_cpu_seconds": .figure(locustCPU), "locust_requests_per_cpu_second": .figure(theirRate),
                                   "ratio": .figure(ratio), "target_ratio": .figure(3)])
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
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
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
        process.arguments = ["serve", "--data", data, "--port", "host=0", "--port", "mobile-sync=0", "--without", "chat", "--without", "agent-runtime"]
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
