import AIBridgeClient
import AIBridgeRelay
import Foundation
import Testing
import LabKernel
import LabStore
import LabTestSupport
@testable import Simulator

@Suite("AI bridge simulation")
struct BridgeSimulationTests {
    static func scenario(seed: UInt64 = 8, devices: Int = 80, hours: Int = 6, start: String = "06:00", extra: String = "") throws -> Scenario {
        try ScenarioLoader.parse(text: """
            name: bridge
            seed: \(seed)
            duration: \(hours)h
            startAt: "\(start)"
            devices:
              - {name: phones, count: \(devices), lifecycle: typical, network: flaky, stacks: [ai-bridge]}
            bridge:
              promptsPerPhoneDay: 120
              awakeFrom: "08:00"
              awakeUntil: "23:00"
              jitter: 30m
              asleepShare: 0%
              restartsPerDay: 4
              repairDelay: {lognormal: {median: 120, sigma: 0.5}}
            \(extra)
            """, file: "bridge.yaml")
    }

    static func total(_ world: FleetWorld, _ name: String, _ labels: String? = nil) -> Double { WorkflowSimulationTests.total(world, name, labels) }

    @Test("desktops asleep until morning answer 503; restarts make phones re-pair; every answer arrives whole; the relay reads no sealed prompt")
    func day() async throws {
        let world = await WorkflowSimulationTests.run(try Self.scenario())
        #expect(Self.total(world, "bridge.requests", "outcome=ok") > 200)
        #expect(Self.total(world, "bridge.requests", "outcome=bridge_offline") > 20, "06:00–08:00 the desktops are closed")
        #expect(Self.total(world, "bridge.daemon_restarts") > 5 && Self.total(world, "bridge.requests", "outcome=unauthorized") > 0)
        #expect(Self.total(world, "bridge.pairings", "outcome=ok") > 0 && Self.total(world, "bridge.repairs") > 0)
        for row in world.invariants.rows where row.name.hasPrefix("bridge.") || row.name == "device.state_survives_relaunch" {
            #expect(row.checks > 0 && row.violations == 0, "\(row.name): \(row.firstViolation ?? ""); replay with seed 8")
        }
        let bridge = try #require(world.bridge)
        #expect(bridge.desks.count > 30 && bridge.desks.count < 80, "users own one to three phones")
        #expect(bridge.relay.state.tokens.count <= 80)
    }

    @Test("a relay crash: phones see the desktop offline while it is down, daemons dial again, requests succeed after")
    func relayCrash() async throws {
        let world = await WorkflowSimulationTests.run(try Self.scenario(devices: 40, hours: 3, start: "10:00",
                                                                        extra: "faults:\n  - {kind: server-crash, server: ai-bridge, at: 1h, duration: 10m}"))
        let bridge = try #require(world.bridge)
        #expect(bridge.relay.state.connectedDaemons.count == bridge.desks.count, "every daemon is back")
        #expect(Self.total(world, "bridge.requests", "outcome=bridge_offline") > 0 && Self.total(world, "bridge.requests", "outcome=ok") > 50)
        for row in world.invariants.rows where row.violations > 0 { Issue.record("\(row.name): \(row.firstViolation ?? "")") }
    }

    @Test("the same seed gives the same results database; another seed another")
    func determinism() async throws {
        let dir = TestPaths.scratchDirectory("bridge-determinism")
        let scenario = try Self.scenario(devices: 30, hours: 3)
        let first = try await DeterminismTests.digest(of: scenario, in: dir, name: "a.sqlite")
        #expect(try await DeterminismTests.digest(of: scenario, in: dir, name: "b.sqlite") == first)
        #expect(try await DeterminismTests.digest(of: scenario.overriding(seed: 9), in: dir, name: "c.sqlite") != first)
    }
}
