import Foundation
import Testing
import LabTestSupport

@Suite("fleetlab seeds")
struct SeedsCommandTests {
    /// Phones that only live their day, with a bound no battery meets: every seed fails it.
    static let strict = """
        name: strict
        seed: 1
        duration: 2h
        devices:
          - {name: phones, count: 20}
        thresholds:
          - {metric: battery.level, percentile: 50, min: 101}
        """

    @Test("--chaos draws faults per seed and prints each failing seed's with the command that replays it, which lists the same faults; --invariants-only judges invariants alone")
    func chaosSearch() throws {
        let dir = TestPaths.scratchDirectory("seeds-chaos")
        let scenario = try writeScenario(Self.strict, in: dir, name: "strict.yaml")
        let search = try CommandRunner.fleetlab(["seeds", scenario, "--count", "3", "--first", "5", "--chaos", "3", "--jobs", "2"], in: dir)
        #expect(search.status == 3, "\(search.stdout)\(search.stderr)")
        #expect(search.stdout.contains("3 seeds from 5, 3 chaos faults each") && search.stdout.contains("3 failed"), "\(search.stdout)")
        let lines = search.stdout.split(separator: "\n").map(String.init)
        let start = try #require(lines.firstIndex { $0.hasPrefix("  seed 6:") })
        #expect(lines[start + 1] == "    faults drawn:")
        let drawn = lines[(start + 2)...(start + 4)].map { $0.trimmingCharacters(in: .whitespaces) }
        #expect(drawn.allSatisfy { $0.hasPrefix("- {kind: ") }, "\(drawn)")
        #expect(lines[start + 5] == "    reproduce with: fleetlab simulate \(scenario) --seed 6 --chaos 3")

        let replay = try CommandRunner.fleetlab(["simulate", scenario, "--seed", "6", "--chaos", "3", "--out", "replay", "--quiet"], in: dir)
        #expect(replay.status == 3)
        #expect(replay.stdout.contains("chaos           3 faults drawn from seed 6, after the scenario's own:"), "\(replay.stdout)")
        for fault in drawn { #expect(replay.stdout.contains("      \(fault)"), "\(fault)") }
        #expect(replay.stdout.contains("reproduce with: fleetlab simulate \(scenario) --seed 6 --devices 20 --duration 2h --chaos 3"))

        let invariants = try CommandRunner.fleetlab(["seeds", scenario, "--count", "3", "--chaos", "3", "--invariants-only"], in: dir)
        #expect(invariants.status == 0 && invariants.stdout.contains("invariants only") && invariants.stdout.contains("every seed passed"), "\(invariants.stdout)")

        let none = try CommandRunner.fleetlab(["seeds", scenario, "--chaos", "0"], in: dir)
        #expect(none.status == 2 && none.stderr.contains("--chaos must be 1...20 faults"), "\(none.stderr)")
    }
}
