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

    @Test("a fault's devices are its own draw: reordering the list, or dropping a fault before it, hits the same phones")
    func faultsAreData() async throws {
        let kill = "{kind: mass-app-kill, at: 40m, fraction: 50%}", outage = "{kind: radio-off, at: 20m, duration: 10m, fraction: 40%}"
        let slow = "{kind: server-slowdown, server: sync, at: 10m, duration: 5m, factor: 3}"
        func killed(_ faults: [String]) async throws -> Double {
            let world = await WorkflowSimulationTests.run(try Self.fleet(faults: faults.joined(separator: ", ")))
            return ChatSimulationTests.total(world, "lifecycle.transitions", "cause=fault_kill")
        }
        let first = try await killed([slow, outage, kill])
        #expect(first > 0)
        #expect(try await killed([kill, outage, slow]) == first)
        #expect(try await killed([outage, kill]) == first)
        #expect(try await killed([kill, kill]) != first, "two identical faults are two draws")
    }

    /// chat-groups for an hour over slow, uneven links: a hop takes seconds, and two hops'
    /// draws differ by more than the time between a socket's acceptance and the next
    /// message, so frames, openings and drops race. The links are slow for 40 minutes, so
    /// the phones have the rest of the hour to settle.
    static func slowChatLinks(devices: Int) throws -> Scenario {
        let path = TestPaths.packageRoot.appendingPathComponent("simulations/chat-groups.yaml").path
        var scenario = try ScenarioLoader.load(path: path).overriding(devices: devices, duration: .hours(1), seed: 104)
        scenario.faults = [.linkSlowdown(at: .zero, duration: .minutes(40), link: .wifi, factor: 100),
                           .linkSlowdown(at: .zero, duration: .minutes(40), link: .cellular, factor: 100)]
        return scenario
    }

    @Test("no chat frame reaches a phone before its socket's opening, even over slow, uneven links (a frame that overtook the opening cut a catch-up short)")
    func framesAfterOpening() async throws {
        let world = await WorkflowSimulationTests.run(try Self.slowChatLinks(devices: 150))
        let chat = try #require(world.chat)
        #expect(chat.framesBeforeOpening == 0)
        #expect(ChatSimulationTests.total(world, "chat.decrypted") > 1_000, "the phones talked")
        #expect(world.invariants.allHold, "\(world.invariants.rows.filter { !$0.passed })")
    }

    @Test("what is on its way over a socket that drops is lost, as on TCP, and every message still arrives")
    func socketsLoseWhatWasInFlight() async throws {
        let world = await WorkflowSimulationTests.run(try Self.slowChatLinks(devices: 300))
        let chat = try #require(world.chat)
        #expect(chat.lostWithSockets > 0, "frames were on their way when their socket dropped")
        #expect(ChatSimulationTests.total(world, "chat.decrypted") > 1_000, "the phones talked")
        #expect(world.invariants.allHold, "\(world.invariants.rows.filter { !$0.passed })")
    }

    @Test("what chaos searches found stays fixed: chat catch-ups that a failing server (503s) cut short leave no message unread",
          arguments: [
              // chat-groups seed 151, `--chaos 6 --shrink`: a phone back in a group it synced
              // while empty sent a message before its failed page was retried.
              (UInt64(151), [Fault.serverSlowdown(at: .seconds(1_583), duration: .seconds(366), server: .chat, factor: 31.6),
                             .serverErrors(at: .seconds(1_592), duration: .seconds(1_312), server: .chat, fraction: Ratio(parsing: "22%")!)]),
              // chat-groups seed 311, `--chaos 8 --shrink`: every page of a phone's catch-up
              // failed until it was suspended; the socket had meanwhile delivered newer messages.
              (UInt64(311), [Fault.serverErrors(at: .seconds(1_023), duration: .seconds(321), server: .chat, fraction: Ratio(parsing: "61%")!),
                             .pushOutage(at: .seconds(794), duration: .seconds(862))]),
          ])
    func chaosFinds(seed: UInt64, faults: [Fault]) async throws {
        let path = TestPaths.packageRoot.appendingPathComponent("simulations/chat-groups.yaml").path
        var scenario = try ScenarioLoader.load(path: path).overriding(devices: 150, duration: .hours(2), seed: seed)
        scenario.faults = faults
        let world = await WorkflowSimulationTests.run(scenario)
        #expect(world.invariants.allHold, "\(world.invariants.rows.filter { !$0.passed })")
    }
}
