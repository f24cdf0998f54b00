import Foundation
import Testing
import LabStore
import LabTestSupport

/// A quick scenario for CLI runs: 50 devices for two hours.
let quickScenario = """
name: quick
seed: 11
duration: 2h
devices:
  - {name: phones, count: 40}
  - {name: tablets, count: 10, power: light, lifecycle: light}
thresholds:
  - {metric: battery.level, percentile: 50, min: 1}
"""

func writeScenario(_ text: String, in dir: URL, name: String = "quick.yaml") throws -> String {
    let path = dir.appendingPathComponent(name).path
    try text.write(toFile: path, atomically: true, encoding: .utf8)
    return path
}

@Suite("fleetlab simulate")
struct SimulateCommandTests {
    @Test("a run writes results and a dashboard, prints a summary, and replays to the same digest")
    func runAndReplay() async throws {
        let dir = TestPaths.scratchDirectory("cli")
        let scenario = try writeScenario(quickScenario, in: dir)
        let first = try await CommandRunner.fleetlabAsync(["simulate", scenario, "--out", "a", "--quiet"], in: dir)
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.stdout.contains("fleetlab simulate quick — seed 11 — PASSED"))
        #expect(first.stdout.contains("reproduce with: fleetlab simulate"))
        #expect(FileManager.default.fileExists(atPath: dir.appendingPathComponent("a/dashboard.html").path))
        #expect(!FileManager.default.fileExists(atPath: dir.appendingPathComponent("a/results.sqlite-wal").path))
        let second = try await CommandRunner.fleetlabAsync(["simulate", scenario, "--out", "b", "--quiet"], in: dir)
        #expect(second.status == 0)
        let other = try await CommandRunner.fleetlabAsync(["simulate", scenario, "--out", "c", "--quiet", "--seed", "12"], in: dir)
        #expect(other.status == 0)
        var digests: [String] = []
        for run in ["a", "b", "c"] {
            digests.append(try await CommandRunner.fleetlabAsync(["digest", "\(run)/results.sqlite"], in: dir).stdout.trimmingCharacters(in: .whitespacesAndNewlines))
        }
        #expect(digests[0].count == 64)
        #expect(digests[0] == digests[1])
        #expect(digests[0] != digests[2])
    }

    @Test("--devices and --duration override the file, and the default output is runs/<name>")
    func overrides() async throws {
        let dir = TestPaths.scratchDirectory("cli")
        let scenario = try writeScenario(quickScenario, in: dir)
        let result = try await CommandRunner.fleetlabAsync(["simulate", scenario, "--devices", "7", "--duration", "30m", "--quiet"], in: dir)
        #expect(result.status == 0, "\(result.stderr)")
        let results = try ResultsDatabase.open(at: dir.appendingPathComponent("runs/quick/results.sqlite").path).load()
        #expect(results.scenario.devices == 7)
        #expect(results.scenario.durationNanoseconds == 1_800_000_000_000)
        #expect(results.deviceClasses.map(\.count) == [6, 1])
    }

    @Test("a failed threshold exits with status 3 and says which")
    func thresholdFails() async throws {
        let dir = TestPaths.scratchDirectory("cli")
        let scenario = try writeScenario(quickScenario + "\n  - {metric: lifecycle.transitions, max: 0}\n", in: dir)
        let result = try await CommandRunner.fleetlabAsync(["simulate", scenario, "--out", "r", "--quiet"], in: dir)
        #expect(result.status == 3)
        #expect(result.stdout.contains("FAILED"))
        #expect(result.stdout.contains("✗ total(lifecycle.transitions)"))
        #expect(FileManager.default.fileExists(atPath: dir.appendingPathComponent("r/dashboard.html").path), "results are kept")
    }

    @Test("Ctrl-C stops the run, keeps the results so far and exits 130")
    func interrupted() async throws {
        let dir = TestPaths.scratchDirectory("cli")
        let scenario = try writeScenario(quickScenario.replacingOccurrences(of: "duration: 2h", with: "duration: 30d")
            .replacingOccurrences(of: "count: 40", with: "count: 2000"), in: dir)
        let process = try CommandRunner.start(["simulate", scenario, "--out", "r"], in: dir)
        // The results file exists once the run has begun (after the handler is installed):
        // a signal sent earlier, while a loaded machine is still starting the process, could
        // find it ignoring SIGINT.
        let deadline = Date().addingTimeInterval(120)
        while !FileManager.default.fileExists(atPath: dir.appendingPathComponent("r/results.sqlite").path), Date() < deadline {
            try await Task.sleep(for: .milliseconds(100))
        }
        try await Task.sleep(for: .milliseconds(500))
        kill(process.processIdentifier, SIGINT)
        try await offPool { process.waitUntilExit() }  // off the cooperative pool, which other tests' servers need
        #expect(process.terminationStatus == 130)
        let results = try ResultsDatabase.open(at: dir.appendingPathComponent("r/results.sqlite").path).load()
        #expect(results.runMetadata["interrupted"] == "true")
        #expect(Int64(results.runMetadata["simulated_ns"] ?? "") ?? 0 > 0)
    }
}

@Suite("Bad input exits with status 2 and a clear message")
struct BadInputTests {
    func run(_ arguments: [String], in dir: URL) async throws -> CommandRunner.Result {
        try await CommandRunner.fleetlabAsync(arguments, in: dir)
    }

    @Test("unknown flags, bad values and missing arguments")
    func arguments() async throws {
        let dir = TestPaths.scratchDirectory("cli")
        let scenario = try writeScenario(quickScenario, in: dir)
        let unknown = try await run(["simulate", scenario, "--turbo"], in: dir)
        #expect(unknown.status == 2 && unknown.stderr.contains("Unknown option '--turbo'"))
        let duration = try await run(["simulate", scenario, "--duration", "soon"], in: dir)
        #expect(duration.status == 2 && duration.stderr.contains("--duration"))
        let devices = try await run(["simulate", scenario, "--devices", "0"], in: dir)
        #expect(devices.status == 2 && devices.stderr.contains("--devices must be between"))
        let missing = try await run(["simulate"], in: dir)
        #expect(missing.status == 2 && missing.stderr.contains("Missing expected argument"))
        let command = try await run(["simulat"], in: dir)
        #expect(command.status == 2)
    }

    @Test("scenario files that are missing or wrong name the file, line and key")
    func scenarios() async throws {
        let dir = TestPaths.scratchDirectory("cli")
        let missing = try await run(["simulate", "nope.yaml"], in: dir)
        #expect(missing.status == 2 && missing.stderr.contains("nope.yaml: no such file"))
        let bad = try writeScenario(quickScenario.replacingOccurrences(of: "seed: 11", with: "seed: 11\nticks: {intervall: 5ms}"), in: dir, name: "bad.yaml")
        let result = try await run(["simulate", bad], in: dir)
        #expect(result.status == 2)
        #expect(result.stderr.contains("bad.yaml:3:9: ticks: unknown key"))
        #expect(result.stderr.contains("ticks: unknown key 'intervall'; expected one of: interval, mode"))
        #expect(!FileManager.default.fileExists(atPath: dir.appendingPathComponent("runs").path), "nothing is written for a bad file")
    }

    @Test("unwritable output paths are refused before the run")
    func outputs() async throws {
        let dir = TestPaths.scratchDirectory("cli")
        let scenario = try writeScenario(quickScenario, in: dir)
        try "x".write(to: dir.appendingPathComponent("afile"), atomically: true, encoding: .utf8)
        let file = try await run(["simulate", scenario, "--out", "afile"], in: dir)
        #expect(file.status == 2 && file.stderr.contains("it is a file, not a directory"))
        let proc = try await run(["simulate", scenario, "--out", "/proc/fleetlab-results"], in: dir)
        #expect(proc.status == 2 && proc.stderr.contains("cannot create the output directory /proc/fleetlab-results"))
    }

    @Test("report and digest refuse files that are not results")
    func reports() async throws {
        let dir = TestPaths.scratchDirectory("cli")
        try "not sqlite".write(to: dir.appendingPathComponent("x.sqlite"), atomically: true, encoding: .utf8)
        let report = try await run(["report", "x.sqlite"], in: dir)
        #expect(report.status == 2 && !report.stderr.isEmpty)
        let missing = try await run(["report", "none.sqlite"], in: dir)
        #expect(missing.status == 2 && missing.stderr.contains("cannot read none.sqlite"))
        let digest = try await run(["digest", "none.sqlite"], in: dir)
        #expect(digest.status == 2)
    }
}

@Suite("Help, report and bench")
struct OtherCommandTests {
    @Test("--help lists the commands and exit codes")
    func help() async throws {
        let top = try await CommandRunner.fleetlabAsync(["--help"])
        #expect(top.status == 0)
        for command in ["simulate", "report", "digest", "bench", "serve"] { #expect(top.stdout.contains(command)) }
        let simulate = try await CommandRunner.fleetlabAsync(["simulate", "--help"])
        #expect(simulate.status == 0 && simulate.stdout.contains("--devices") && simulate.stdout.contains("Exit status"))
        #expect(try await CommandRunner.fleetlabAsync(["--version"]).stdout.contains("0.1.0"))
    }

    @Test("report re-renders a dashboard, with a layout when asked")
    func report() async throws {
        let dir = TestPaths.scratchDirectory("cli")
        let scenario = try writeScenario(quickScenario, in: dir)
        #expect(try await CommandRunner.fleetlabAsync(["simulate", scenario, "--out", "r", "--quiet"], in: dir).status == 0)
        try #"{"title": "CI", "panels": ["summary", "thresholds"]}"#.write(to: dir.appendingPathComponent("ci.json"), atomically: true, encoding: .utf8)
        let result = try await CommandRunner.fleetlabAsync(["report", "r/results.sqlite", "--out", "ci.html", "--layout", "ci.json"], in: dir)
        #expect(result.status == 0, "\(result.stderr)")
        let html = try String(contentsOf: dir.appendingPathComponent("ci.html"), encoding: .utf8)
        #expect(html.contains("id=\"thresholds\"") && !html.contains("id=\"battery\""))
        let badOut = try await CommandRunner.fleetlabAsync(["report", "r/results.sqlite", "--out", "missing-dir/x.html"], in: dir)
        #expect(badOut.status == 2 && badOut.stderr.contains("does not exist"))
    }

    @Test("bench kernel measures both loops in one run")
    func benchKernel() async throws {
        let result = try await CommandRunner.fleetlabAsync(["bench", "kernel", "--events", "200000", "--pending", "1000", "--repetitions", "1"])
        #expect(result.status == 0)
        #expect(result.stdout.contains("kernel") && result.stdout.contains("bare heap") && result.stdout.contains("ratio"))
        #expect(result.stdout.contains("same work   yes"))
    }
}
