import Foundation
import LabKernel
import LabTestSupport
import Testing

@Suite("fleetlab bench --json")
struct BenchJSONTests {
    /// Runs `fleetlab bench ARGS --json FILE` from the repository root (the engine bench reads
    /// its sequence there) and reads the file back.
    static func bench(_ arguments: [String]) async throws -> JSONValue {
        let file = TestPaths.scratchDirectory("bench-json").appendingPathComponent("figures.json")
        let result = try await CommandRunner.fleetlabAsync(["bench"] + arguments + ["--json", file.path])
        #expect(result.status == 0, "\(arguments): \(result.stderr)")
        return try JSONValue.parse(String(contentsOf: file, encoding: .utf8))
    }

    @Test("every bench writes what it printed as JSON: its name, build, parameters and figures")
    func everyBench() async throws {
        let kernel = try await Self.bench(["kernel", "--events", "20000", "--pending", "200", "--repetitions", "1"])
        #expect(kernel["bench"]?.stringValue == "kernel")
        #expect(kernel["build"]?.stringValue?.hasPrefix("fleetlab ") == true)
        #expect(kernel["figures"]?["kernel_events_per_second"]?.numberValue ?? 0 > 0)
        #expect(kernel["figures"]?["same_work"]?.boolValue == true)
        #expect(kernel["parameters"]?["events"]?.numberValue == 20_000)

        let engine = try await Self.bench(["engine", "--instances", "50", "--rounds", "1", "--store", "memory"])
        #expect(engine["figures"]?.arrayValue?.first?["store"]?.stringValue == "in-memory")
        #expect(engine["figures"]?.arrayValue?.first?["steps_per_second"]?.numberValue ?? 0 > 0)

        let crypto = try await Self.bench(["crypto", "--operations", "10", "--rounds", "1"])
        #expect(crypto["figures"]?.arrayValue?.count ?? 0 >= 3)
        #expect(crypto["figures"]?.arrayValue?.allSatisfy { $0["ours_per_second"]?.numberValue ?? 0 > 0 } == true)

        let sync = try await Self.bench(["sync", "--devices", "10", "--requests", "40", "--concurrency", "2", "--approvals", "20"])
        #expect(sync["figures"]?["http_syncs_per_second"]?.numberValue ?? 0 > 0)
        #expect(sync["figures"]?["core_syncs_per_second"]?.numberValue ?? 0 > 0)

        let fleet = try await Self.bench(["fleet", "--devices", "20", "--duration", "30m", "--only", "device model,workflows"])
        let rows = fleet["figures"]?.arrayValue ?? []
        #expect(rows.map { $0["stack_set"]?.stringValue } == ["device model", "workflows"])
        #expect(rows.allSatisfy { $0["peak_rss_bytes"]?.numberValue ?? 0 > 1_000_000 })
    }

    @Test("an unwritable --json path is exit 2 before anything is measured")
    func unwritable() async throws {
        let result = try await CommandRunner.fleetlabAsync(["bench", "kernel", "--json", "/nonexistent-dir/figures.json"])
        #expect(result.status == 2)
        #expect(result.stderr.contains("/nonexistent-dir"))
    }
}
