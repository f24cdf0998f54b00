import Foundation
import Testing
import LabKernel
import LabStore
import LabTestSupport
@testable import Simulator

/// `--chaos N`: faults drawn from the seed, and faults that overlap.
@Suite("Chaos faults")
struct ChaosTests {
    /// The sync fleet with chat beside it: every kind of fault applies.
    static func fleet(seed: UInt64 = 3, faults: String = "") throws -> Scenario {
        try ScenarioLoader.parse(text: """
            name: chaos
            seed: \(seed)
            duration: 2h
            startAt: "10:00"
            bucket: 15m
            devices:
              - {name: busy, count: 30, power: heavy, lifecycle: {preset: heavy, sessionsPerDay: 90, appShare: 40%}, network: typical,
                 stacks: [workflows, sync, chat]}
            workflows:
              run:
                - {sequence: \(SyncSimulationTests.workflows)/payment-verification.json, start: {poisson: 20m}}
            sync:
              operator: {thinkTime: 20}
            chat:
              groups: 3
              groupSize: [3, 6]
              messagesPerUserHour: 6
              actions: {editShare: 10%, deleteShare: 5%, historyPerUserDay: 6, logoutsPerUserDay: 1}
            faults: [\(faults)]
            """, file: "chaos.yaml")
    }

    /// Every counter total and every distribution of two runs, metric by metric.
    static func expectSameRun(_ a: FleetWorld, _ b: FleetWorld, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(a.recorder.descriptors.map(\.name) == b.recorder.descriptors.map(\.name), sourceLocation: sourceLocation)
        for descriptor in a.recorder.descriptors {
            guard let other = b.recorder.descriptors.first(where: { $0.name == descriptor.name && $0.labels == descriptor.labels }) else { continue }
            #expect(a.recorder.totals[descriptor.id] == b.recorder.totals[other.id], "\(descriptor.name){\(descriptor.labels)}", sourceLocation: sourceLocation)
            #expect(a.recorder.runHistograms[descriptor.id] == b.recorder.runHistograms[other.id], "\(descriptor.name){\(descriptor.labels)}",
                    sourceLocation: sourceLocation)
        }
    }

    @Test("chaos faults are the seed's: the same seed draws the same ones, another seed others, each of a kind the scenario can take, ending by 90 % of the run")
    func drawnFromTheSeed() throws {
        let scenario = try Self.fleet()
        let drawn = scenario.chaosFaults(12)
        #expect(drawn == scenario.chaosFaults(12))
        #expect(drawn != scenario.overriding(seed: 4).chaosFaults(12))
        #expect(Set(drawn.map(\.kind)).count >= 5, "\(drawn.map(\.kind))")
        for fault in drawn {
            #expect(fault.at >= scenario.duration / 20 && fault.at + (fault.duration ?? .zero) <= scenario.duration * 9 / 10, "\(fault.yaml)")
            #expect(fault.needs.isEmpty || fault.needs.contains(where: scenario.runs), "\(fault.yaml)")
        }
        // A fleet that runs no stack has no server to crash or slow, and nothing to push.
        let bare = try ScenarioLoader.parse(text: "name: bare\nseed: 5\nduration: 6h\ndevices: [{name: a, count: 10}]\n", file: "bare.yaml")
        let kinds = Set(bare.chaosFaults(20).map(\.kind))
        #expect(kinds.isSubset(of: ["mass-app-kill", "radio-off", "link-slowdown"]) && kinds.count == 3, "\(kinds)")
        #expect(scenario.addingChaos(3).text.contains("# fleetlab chaos: 3 faults from seed 3"))
    }

    @Test("the faults a chaos run prints, pasted at the end of the scenario's faults, replay the same run")
    func printedFaultsReplay() async throws {
        let chaotic = try Self.fleet(faults: "{kind: server-crash, server: chat, at: 20m, duration: 5m}").addingChaos(4)
        let printed = chaotic.faults.map(\.yaml).joined(separator: ", ")
        let pasted = try Self.fleet(faults: printed)
        #expect(pasted.faults == chaotic.faults)
        Self.expectSameRun(await WorkflowSimulationTests.run(chaotic), await WorkflowSimulationTests.run(pasted))
    }

    @Test("overlapping faults hold while any of them does: two crashes of a server that overlap are one long crash, and so are two radio-off windows that hit every phone")
    func overlapsHold() async throws {
        let overlapping = try Self.fleet(faults: """
            {kind: server-crash, server: sync, at: 20m, duration: 10m}, {kind: server-crash, server: sync, at: 25m, duration: 20m},
            {kind: radio-off, at: 1h, duration: 10m}, {kind: radio-off, at: 1h5m, duration: 15m}
            """)
        let joined = try Self.fleet(faults: """
            {kind: server-crash, server: sync, at: 20m, duration: 25m}, {kind: radio-off, at: 1h, duration: 20m}
            """)
        let (a, b) = (await WorkflowSimulationTests.run(overlapping), await WorkflowSimulationTests.run(joined))
        #expect(SyncSimulationTests.total(a, "sync.requests", "outcome=timeout") > 0)
        for name in ["sync.requests", "sync.commands", "chat.messages", "chat.reconnects", "lifecycle.transitions", "network.changes", "http.failures"] {
            for descriptor in a.recorder.descriptors where descriptor.name == name {
                #expect(a.recorder.totals[descriptor.id] == SyncSimulationTests.total(b, name, descriptor.labels), "\(name){\(descriptor.labels)}")
            }
        }
    }

    @Test("a small chaos search: four seeds of six drawn faults each over sync and chat, and every invariant holds in each")
    func invariantsHoldUnderChaos() async throws {
        for seed in UInt64(1)...4 {
            let scenario = try Self.fleet(seed: seed).addingChaos(6)
            let world = await WorkflowSimulationTests.run(scenario)
            #expect(world.invariants.allHold, "seed \(seed), faults \(scenario.faults.map(\.yaml)): \(world.invariants.rows.filter { !$0.passed })")
        }
    }

    @Test("what chaos searches found stays fixed: chat-groups' seed 104 with the chat server down across a mass app kill (a frame overtook the socket's opening and cut a catch-up short)")
    func chaosFinds() async throws {
        let path = TestPaths.packageRoot.appendingPathComponent("simulations/chat-groups.yaml").path
        var scenario = try ScenarioLoader.load(path: path).overriding(devices: 150, duration: .hours(2), seed: 104)
        let noop = Fault.pushOutage(at: .seconds(1), duration: .seconds(1))
        scenario.faults = [noop, noop, .serverCrash(at: .seconds(3_668), duration: .seconds(1_712), server: .chat), noop,
                           .massAppKill(at: .seconds(4_625), fraction: Ratio(parsing: "46%")!, population: nil)]
        let world = await WorkflowSimulationTests.run(scenario)
        #expect(world.invariants.allHold, "\(world.invariants.rows.filter { !$0.passed })")
    }
}
