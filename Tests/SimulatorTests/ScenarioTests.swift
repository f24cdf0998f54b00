import Foundation
import Testing
import LabKernel
import LabTestSupport
@testable import Simulator

@Suite("Scenario files")
struct ScenarioTests {
    let minimal = """
    name: t
    seed: 1
    duration: 1h
    devices:
      - name: phones
        count: 10
    """

    func parse(_ text: String) throws(ScenarioError) -> Scenario {
        try ScenarioLoader.parse(text: text, file: "test.yaml")
    }

    func problem(_ text: String) -> ScenarioError? {
        do {
            _ = try parse(text)
            return nil
        } catch {
            return error
        }
    }

    @Test("every scenario under simulations/ loads")
    func shippedScenarios() throws {
        let dir = TestPaths.packageRoot.appendingPathComponent("simulations")
        let files = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasSuffix(".yaml") }
        #expect(files.contains("smoke.yaml"))
        for file in files {
            let scenario = try ScenarioLoader.load(path: dir.appendingPathComponent(file).path)
            #expect(scenario.deviceCount > 0, "\(file)")
        }
        let smoke = try ScenarioLoader.load(path: dir.appendingPathComponent("smoke.yaml").path)
        #expect(smoke.deviceCount == 1_000 && smoke.duration == .hours(6))
        // The demo runs the whole stack, a fault, and bounds on latency and sync cadence.
        #expect(StackKind.allCases.allSatisfy(smoke.runs) && !smoke.faults.isEmpty)
        #expect(smoke.thresholds.contains { $0.metric == "http.latency" } && smoke.thresholds.contains { $0.metric == "sync.interval" })
    }

    @Test("every scenario shown in README.md and docs/scenarios.md parses")
    func documentedExamples() throws {
        var checked = 0
        for doc in ["README.md", "docs/scenarios.md"] {
            let text = try String(contentsOf: TestPaths.packageRoot.appendingPathComponent(doc), encoding: .utf8)
            for block in text.components(separatedBy: "```yaml\n").dropFirst() {
                let yaml = block.components(separatedBy: "```").first ?? ""
                guard yaml.hasPrefix("name:") else { continue }
                do {
                    // As if the file were in simulations/, where the named workflows live.
                    _ = try ScenarioLoader.parse(text: yaml, file: doc,
                                                 directory: TestPaths.packageRoot.appendingPathComponent("simulations").path)
                    checked += 1
                } catch {
                    Issue.record("\(doc): \(error)")
                }
            }
        }
        #expect(checked >= 2)
    }

    @Test("defaults fill what a minimal file leaves out")
    func defaults() throws {
        let s = try parse(minimal)
        #expect(s.startAt == .hours(8) && s.bucket == .minutes(1) && s.ticks.interval == .milliseconds(100))
        #expect(s.ticks.mode == .fastForward && s.faults.isEmpty && s.thresholds.isEmpty && s.eventSample == 10_000)
        #expect(s.devices[0].power == PowerProfile.presets["typical"])
    }

    @Test("presets are overridden field by field")
    func overrides() throws {
        let s = try parse(minimal + """

            power: {preset: heavy, drainPerHour: {foreground: 25}, chargePerHour: 60}
            lifecycle: {activeHours: "06:30-22:00", backgroundRefresh: never, backgroundKillAfter: {exponential: 2h}}
            network: flaky
        """)
        let p = s.devices[0]
        #expect(p.power.drainForeground == 25_000_000 && p.power.chargeRate == 60_000_000)
        #expect(p.power.drainIdle == PowerProfile.presets["heavy"]!.drainIdle)
        #expect(p.lifecycle.activeFrom == .minutes(390) && p.lifecycle.activeUntil == .hours(22))
        #expect(p.lifecycle.backgroundEvery == nil && p.lifecycle.backgroundKillAfter == .exponential(mean: 7_200))
        #expect(p.network == NetworkProfile.presets["flaky"])
    }

    @Test("an unknown key is rejected with its path, line and the keys allowed there")
    func unknownKey() {
        let error = problem(minimal + "\n    power: {drainPerHour: {foregroud: 12}}")
        #expect(error?.path == "devices[0].power.drainPerHour")
        #expect(error?.line == 7)
        #expect(error?.message.contains("unknown key 'foregroud'") == true)
        #expect(error?.message.contains("foreground, screen, idle") == true)
        #expect(error?.description.hasPrefix("test.yaml:7:") == true)
        let top = problem(minimal + "\nseeed: 4")
        #expect(top?.message.contains("unknown key 'seeed'") == true && top?.line == 7)
    }

    @Test("bad values say what was expected", arguments: [
        ("duration: 1h", "duration: soon", "duration", "expected a duration"),
        ("seed: 1", "seed: -4", "seed", "expected a whole number"),
        ("count: 10", "count: ten", "devices[0].count", "expected a whole number"),
        ("count: 10", "count: -3", "devices[0].count", "between 0 and 50,000,000"),
        ("name: t", "name: \"bad name\"", "name", "letters, digits"),
        ("duration: 1h", "duration: 1h\nticks: {mode: sometimes}", "ticks.mode", "fast-forward, every-tick"),
        ("duration: 1h", "duration: 1h\nticks: {interval: 0s}", "ticks.interval", "at least 1ms"),
        ("duration: 1h", "duration: 1h\nstartAt: \"25:00\"", "startAt", "time of day"),
        ("count: 10", "count: 10\n    power: solar", "devices[0].power", "unknown power preset 'solar'"),
        ("count: 10", "count: 10\n    network: {wifiShare: 1.5}", "devices[0].network.wifiShare", "between 0 and 1"),
        ("count: 10", "count: 10\n    lifecycle: {sessionLength: {uniform: [5m, 1m]}}", "devices[0].lifecycle.sessionLength.uniform", "low <= high"),
        ("count: 10", "count: 10\n    lifecycle: {backgroundRefresh: {every: 10s, window: 30s}}", "devices[0].lifecycle.backgroundRefresh", "shorter than its period"),
        ("duration: 1h", "duration: 1h\nfaults: [{kind: meteor, at: 1m}]", "faults[0].kind", "unknown fault kind 'meteor'"),
        ("duration: 1h", "duration: 1h\nfaults: [{kind: mass-app-kill, at: 2h}]", "faults[0]", "not before the end of the run"),
        ("duration: 1h", "duration: 1h\nfaults: [{kind: radio-off, at: 1m, duration: 5m, devices: tablets}]", "faults[0]", "no device population named 'tablets'"),
        ("duration: 1h", "duration: 1h\nthresholds: [{metric: latency, max: 1}]", "thresholds[0].metric", "unknown metric 'latency'"),
        ("duration: 1h", "duration: 1h\nthresholds: [{metric: ticks, percentile: 99, max: 1}]", "thresholds[0]", "its thresholds use total"),
        ("duration: 1h", "duration: 1h\nthresholds: [{metric: session.length, percentile: 99, max: 12}]", "thresholds[0].max", "a duration with a unit"),
        ("duration: 1h", "duration: 1h\nthresholds: [{metric: ticks, labels: {colour: red}, max: 1}]", "thresholds[0]", "has no label 'colour'"),
        ("duration: 1h", "duration: 1h\nsync: {retention: {closedApprovals: 0s}}", "sync.retention.closedApprovals", "expected 1m to 3650d"),
        ("duration: 1h", "duration: 1h\nsync: {retention: {statuses: 1d}}", "sync.retention", "unknown key 'statuses'"),
    ])
    func badValues(replace: String, with replacement: String, path: String, message: String) {
        let text = minimal.replacingOccurrences(of: replace, with: replacement)
        let error = problem(text)
        #expect(error?.path == path, "\(String(describing: error))")
        #expect(error?.message.contains(message) == true, "\(String(describing: error))")
        #expect(error?.line != nil)
    }

    @Test("broken YAML and missing keys are reported, not crashed on")
    func structural() {
        #expect(problem("name: [unclosed")?.message.contains("not valid YAML") == true)
        #expect(problem("")?.message == "the file is empty")
        #expect(problem("- just\n- a list")?.message.contains("expected a mapping") == true)
        #expect(problem("name: t\nseed: 1\nduration: 1h")?.message == "missing required key 'devices'")
        #expect(problem("name: t\nseed: 1\nduration: 1h\ndevices: []")?.message.contains("at least one device population") == true)
        #expect(problem(minimal + "\n  - name: phones\n    count: 1")?.message.contains("used twice") == true)
        let missing: ScenarioError
        do { _ = try ScenarioLoader.load(path: "/nonexistent/scenario.yaml"); return } catch { missing = error }
        #expect(missing.description == "/nonexistent/scenario.yaml: no such file")
    }

    @Test("--devices shares a new total over populations in proportion")
    func deviceOverride() throws {
        let s = try parse(minimal + "\n  - name: tablets\n    count: 30\n  - name: watches\n    count: 60")
        let scaled = s.overriding(devices: 1_001)
        #expect(scaled.devices.map(\.count) == [100, 300, 601])
        #expect(scaled.deviceCount == 1_001)
        #expect(scaled.text.hasSuffix("# fleetlab overrides: devices=1001\n"))
        let longer = s.overriding(duration: .hours(24), seed: 9)
        #expect(longer.seed == 9 && longer.duration == .hours(24) && longer.bucket == .minutes(10))
    }

    @Test("a fault plan for fleetlab serve: its own file, or a scenario's server faults with that scenario's service times")
    func servePlans() throws {
        let root = TestPaths.packageRoot.appendingPathComponent("simulations")
        let shipped = try ServeFaultPlan.load(path: root.appendingPathComponent("serve/brownout-and-outage.yaml").path)
        #expect(shipped.every == .minutes(10) && shipped.faults.map(\.kind) == ["server-slowdown", "server-crash", "server-errors"])
        #expect(shipped.serviceTimes[.sync] == SyncSettings().server.serviceTime && shipped.skipped.isEmpty)
        let outage = try ServeFaultPlan.load(path: root.appendingPathComponent("sync-outage.yaml").path)
        #expect(outage.faults.map(\.kind) == ["server-crash", "server-slowdown"] && outage.every == nil)
        #expect(outage.skipped.map(\.kind) == ["partition", "push-outage", "mass-app-kill"])
        #expect(outage.serviceTimes[.sync] == .lognormal(median: 0.006, sigma: 0.5), "the scenario's own sync server")
        #expect(outage.serviceTimes[.chat] == ChatSettings().server.serviceTime)
        #expect(throws: ScenarioError.self) { try ServeFaultPlan.load(path: root.appendingPathComponent("fleet-100k.yaml").path) }
    }
}
