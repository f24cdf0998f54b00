import Foundation
import Testing
import LabKernel
import LabStore
import LabTestSupport

/// 40 phones syncing for two hours; `slowServer` makes the sync server one slow worker,
/// which moves sync p99 (the change a capacity regression looks like).
func syncScenario(slowServer: Bool) -> String {
    let workflows = TestPaths.packageRoot.appendingPathComponent("simulations/workflows").path
    return """
    name: gate
    seed: 3
    duration: 2h
    devices:
      - {name: phones, count: 40, stacks: [workflows, sync]}
    workflows:
      run:
        - {sequence: \(workflows)/payment-verification.json, start: {poisson: 20m}}
    sync:
      server: \(slowServer ? "{workers: 1, serviceTime: {lognormal: {median: 150ms, sigma: 0.5}}}" : "{workers: 8, serviceTime: {lognormal: {median: 5ms, sigma: 0.5}}}")
      operator: {thinkTime: 30}
    thresholds:
      - {metric: battery.level, percentile: 50, min: 1}
    """
}

@Suite("fleetlab compare")
struct CompareCommandTests {
    /// Runs the baseline twice and the slow-server variant once, in one scratch directory.
    static func threeRuns() async throws -> URL {
        let dir = TestPaths.scratchDirectory("compare")
        let base = try writeScenario(syncScenario(slowServer: false), in: dir, name: "base.yaml")
        let slow = try writeScenario(syncScenario(slowServer: true), in: dir, name: "slow.yaml")
        for (scenario, out) in [(base, "a"), (base, "b"), (slow, "c")] {
            let run = try await CommandRunner.fleetlabAsync(["simulate", scenario, "--out", out, "--quiet"], in: dir)
            #expect(run.status == 0, "\(run.stderr)")
        }
        return dir
    }

    @Test("a change that moves sync p99 fails with exit 3 and names it; two equal runs are identical")
    func regressionAndIdentity() async throws {
        let dir = try await Self.threeRuns()
        let failed = try await CommandRunner.fleetlabAsync(["compare", "a/results.sqlite", "c/results.sqlite", "--out", "cmp.html",
                                                            "--junit", "cmp.xml", "--json", "cmp.json"], in: dir)
        #expect(failed.status == 3, "\(failed.stderr)")
        #expect(failed.stdout.contains("fleetlab compare — FAILED"))
        #expect(failed.stdout.contains("http.latency{endpoint=POST /api/v1/mobile/sync,stack=sync} p99"))
        #expect(failed.stdout.contains("largest"))
        let page = try String(contentsOf: dir.appendingPathComponent("cmp.html"), encoding: .utf8)
        #expect(page.contains("class=\"verdict fail\""))
        let json = try JSONValue.parse(String(contentsOf: dir.appendingPathComponent("cmp.json"), encoding: .utf8))
        #expect(json["verdict"]?.stringValue == "failed")
        #expect(json["breaches"]?.arrayValue?.contains { $0["name"]?.stringValue?.hasPrefix("http.latency{endpoint=POST /api/v1/mobile/sync") == true } == true)

        let same = try await CommandRunner.fleetlabAsync(["compare", "a/results.sqlite", "b/results.sqlite", "--expect-identical"], in: dir)
        #expect(same.status == 0, "\(same.stdout)\(same.stderr)")
        #expect(same.stdout.contains("IDENTICAL"))
        #expect(FileManager.default.fileExists(atPath: dir.appendingPathComponent("b/compare.html").path), "the page goes beside the candidate")

        let loose = try await CommandRunner.fleetlabAsync(["compare", "a/results.sqlite", "c/results.sqlite", "--max-regression", "off"], in: dir)
        #expect(loose.status == 0, "nothing is judged without a limit: \(loose.stdout)")
        let strict = try await CommandRunner.fleetlabAsync(["compare", "a/results.sqlite", "c/results.sqlite", "--max-regression", "off", "--expect-identical"], in: dir)
        #expect(strict.status == 3)
        #expect(strict.stdout.contains("behaviour changed"))
    }

    @Test("JUnit XML from simulate and compare validates against the JUnit schema, failures included")
    func junitSchema() async throws {
        let dir = try await Self.threeRuns()
        let xmllint = ["/usr/bin/xmllint", "/bin/xmllint"].first { FileManager.default.isExecutableFile(atPath: $0) }
        let schema = TestPaths.packageRoot.appendingPathComponent("Tests/Fixtures/junit.xsd").path
        let simulate = try await CommandRunner.fleetlabAsync(["simulate", "slow.yaml", "--out", "d", "--quiet", "--junit", "sim.xml", "--json", "sim.json"], in: dir)
        #expect(simulate.status == 0)
        let compare = try await CommandRunner.fleetlabAsync(["compare", "a/results.sqlite", "c/results.sqlite", "--junit", "cmp.xml",
                                                             "--metric", "sync.requests=1%", "--expect-identical"], in: dir)
        #expect(compare.status == 3)
        let tool = try #require(xmllint, "xmllint is needed for this test: scripts/install-deps installs libxml2-utils")
        for file in ["sim.xml", "cmp.xml"] {
            let check = try await offPool { try CommandRunner.run(tool, ["--noout", "--schema", schema, file], in: dir) }
            #expect(check.status == 0, "\(file): \(check.stderr)")
        }
        // The schema does reject what it should: a suite without its required attributes.
        try "<testsuites><testsuite name=\"x\"/></testsuites>".write(to: dir.appendingPathComponent("bad.xml"), atomically: true, encoding: .utf8)
        let bad = try await offPool { try CommandRunner.run(tool, ["--noout", "--schema", schema, "bad.xml"], in: dir) }
        #expect(bad.status != 0)
        let xml = try String(contentsOf: dir.appendingPathComponent("cmp.xml"), encoding: .utf8)
        #expect(xml.contains("<testcase name=\"identical to the baseline\" classname=\"fleetlab.compare\""))
        #expect(xml.contains("<testcase name=\"--metric sync.requests=1%\""))
        #expect(xml.contains("<failure message="))
        let sim = try String(contentsOf: dir.appendingPathComponent("sim.xml"), encoding: .utf8)
        #expect(sim.contains("classname=\"fleetlab.invariants\""))
        #expect(sim.contains("name=\"p50(battery.level) &gt;= 1.0%\""))
        let summary = try JSONValue.parse(String(contentsOf: dir.appendingPathComponent("sim.json"), encoding: .utf8))
        #expect(summary["passed"]?.boolValue == true)
        #expect(summary["latency"]?.arrayValue?.contains { $0["endpoint"]?.stringValue == "POST /api/v1/mobile/sync" } == true)
    }

    @Test("bad input is exit 2 with a message: a missing file, a file that is not results, a malformed limit")
    func badInput() async throws {
        let dir = TestPaths.scratchDirectory("compare")
        try "not sqlite".write(to: dir.appendingPathComponent("junk.sqlite"), atomically: true, encoding: .utf8)
        let missing = try await CommandRunner.fleetlabAsync(["compare", "nope.sqlite", "junk.sqlite"], in: dir)
        #expect(missing.status == 2)
        #expect(missing.stderr.contains("nope.sqlite: no such file"))
        let junk = try await CommandRunner.fleetlabAsync(["compare", "junk.sqlite", "junk.sqlite"], in: dir)
        #expect(junk.status == 2)
        #expect(junk.stderr.contains("junk.sqlite"))
        let limit = try await CommandRunner.fleetlabAsync(["compare", "junk.sqlite", "junk.sqlite", "--metric", "http.latency:p99"], in: dir)
        #expect(limit.status == 2)
        #expect(limit.stderr.contains("--metric http.latency:p99: expected NAME=LIMIT"))
        let regression = try await CommandRunner.fleetlabAsync(["compare", "junk.sqlite", "junk.sqlite", "--max-regression", "5"], in: dir)
        #expect(regression.status == 2)
        #expect(regression.stderr.contains("expected a percentage"))
    }
}
