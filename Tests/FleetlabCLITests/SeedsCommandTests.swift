import Foundation
import Testing
import LabTestSupport

@Suite("fleetlab seeds")
struct SeedsCommandTests {
    /// Phones that only live their day for two hours, held to one threshold.
    static func phones(_ name: String, count: Int, threshold: String) -> String {
        """
        name: \(name)
        seed: 1
        duration: 2h
        devices:
          - {name: phones, count: \(count)}
        thresholds:
          - \(threshold)
        """
    }

    /// A bound no battery meets: every seed fails it.
    static let strict = phones("strict", count: 20, threshold: "{metric: battery.level, percentile: 50, min: 101}")

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

    /// A bound only an app-kill fault breaks.
    static let noKills = phones("kills", count: 30, threshold: "{metric: lifecycle.transitions, labels: {cause: fault_kill}, stat: total, max: 0}")

    @Test("--shrink cuts a failing seed's drawn faults down to those it needs: pasted into the scenario they fail it alone; a seed that fails without them says so")
    func shrink() throws {
        let dir = TestPaths.scratchDirectory("seeds-shrink")
        let scenario = try writeScenario(Self.noKills, in: dir, name: "kills.yaml")
        let search = try CommandRunner.fleetlab(["seeds", scenario, "--first", "3", "--count", "2", "--chaos", "5", "--shrink", "--jobs", "2"], in: dir)
        #expect(search.status == 3, "\(search.stdout)\(search.stderr)")
        let lines = search.stdout.split(separator: "\n").map(String.init)
        // Seed 3 drew two kills among radio outages and slow links: one kill is enough.
        let start = try #require(lines.firstIndex { $0.hasPrefix("  seed 3:") })
        let drawn = lines[(start + 2)...(start + 6)].map { $0.trimmingCharacters(in: .whitespaces) }
        #expect(drawn.filter { $0.contains("kind: mass-app-kill") }.count == 2, "\(drawn)")
        let shrunk = try #require(lines[start...].firstIndex { $0.hasPrefix("    shrunk to") })
        #expect(lines[shrunk].hasPrefix("    shrunk to 1 of the 5 faults in "), "\(lines[shrunk])")
        let kept = lines[shrunk + 1].trimmingCharacters(in: .whitespaces)
        #expect(kept.hasPrefix("- {kind: mass-app-kill") && drawn.contains(kept), "\(kept)")
        #expect(lines[shrunk + 2] == "    replay them: add them to the scenario's faults: and run fleetlab simulate \(scenario) --seed 3")

        // Pasted alone, the kept fault fails the bound; the scenario without it passes.
        let pasted = try writeScenario(Self.noKills + "\nfaults:\n  \(kept)\n", in: dir, name: "kept.yaml")
        let alone = try CommandRunner.fleetlab(["simulate", pasted, "--seed", "3", "--out", "alone", "--quiet"], in: dir)
        #expect(alone.status == 3 && alone.stdout.contains("total(lifecycle.transitions{cause=fault_kill})"), "\(alone.stdout)")
        #expect(try CommandRunner.fleetlab(["simulate", scenario, "--seed", "3", "--out", "none", "--quiet"], in: dir).status == 0)

        let always = try writeScenario(Self.strict, in: dir, name: "strict.yaml")
        let without = try CommandRunner.fleetlab(["seeds", always, "--count", "1", "--chaos", "2", "--shrink"], in: dir)
        #expect(without.status == 3 && without.stdout.contains("it fails without any drawn fault"), "\(without.stdout)")
        let needsChaos = try CommandRunner.fleetlab(["seeds", always, "--shrink"], in: dir)
        #expect(needsChaos.status == 2 && needsChaos.stderr.contains("--shrink cuts down drawn faults: it needs --chaos N"), "\(needsChaos.stderr)")
    }
}
