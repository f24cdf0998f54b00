import DesktopBridgeClient
import DesktopBridgeServer
import LabStore
import DesktopBridgeWire
import Foundation
import Testing
import LabKernel
import LabTestSupport
@testable import Simulator

@Suite("Desktop bridge simulation")
struct DesktopSimulationTests {
    static func scenario(seed: UInt64 = 4, devices: Int = 60, hours: Int = 6, start: String = "17:00", extra: String = "") throws -> Scenario {
        try ScenarioLoader.parse(text: """
            name: desktop
            seed: \(seed)
            duration: \(hours)h
            startAt: "\(start)"
            devices:
              - {name: phones, count: \(devices), lifecycle: heavy, network: flaky, stacks: [desktop-bridge]}
            desktop:
              promptsPerPhoneDay: 200
              awakeFrom: "08:00"
              awakeUntil: "21:00"
              jitter: 10m
              asleepShare: 0%
              cancelShare: 10%
            \(extra)
            """, file: "desktop.yaml")
    }

    static func total(_ world: FleetWorld, _ name: String, _ labels: String? = nil) -> Double { WorkflowSimulationTests.total(world, name, labels) }

    @Test("an evening at home: turns stream to every phone of a desktop, Wi-Fi drops rebuild timelines without a gap or a double, desktops sleeping at night refuse dials")
    func evening() async throws {
        let world = await WorkflowSimulationTests.run(try Self.scenario())
        #expect(Self.total(world, "desktop.prompts", "outcome=ok") > 50)
        #expect(Self.total(world, "desktop.prompts", "outcome=cancelled") > 0)
        #expect(Self.total(world, "desktop.prompts", "outcome=not_connected") > 0, "after 21:00 the desktops sleep; away from the Wi-Fi nothing connects")
        #expect(Self.total(world, "desktop.reconnects") > 0 && Self.total(world, "desktop.rebuilds") > 0)
        #expect(Self.total(world, "desktop.chunks") > Self.total(world, "desktop.prompts", "outcome=ok") * 5, "each answer streams in chunks to every mirroring phone")
        for row in world.invariants.rows where row.name.hasPrefix("desktop.") || row.name == "device.state_survives_relaunch" {
            #expect(row.checks > 0 && row.violations == 0, "\(row.name): \(row.firstViolation ?? ""); replay with seed 4")
        }
        let desktop = try #require(world.desktop)
        #expect(desktop.desks.count > 20 && desktop.desks.count < 60, "a desktop has one to three phones")
        let dialects = Set(desktop.clients.values.map(\.config.dialect))
        #expect(dialects == Set(ACPDialect.allCases), "both dialects on one desktop's phones")
        // Phones of the same desktop that mirror a session show the same updates.
        let mirrored = desktop.desks.filter { $0.phones.count > 1 && $0.session != nil }
        #expect(!mirrored.isEmpty)
        for desk in mirrored {
            let session = desk.session!
            let history = (desk.bridge.state.history[session] ?? []).map { DesktopClient.line($0.update) }
            for device in desk.phones {
                let timeline = desktop.clients[device]!.transcript(session)
                #expect(Array(history.prefix(timeline.count)) == timeline, "device \(device)")
            }
        }
    }

    @Test("the same seed gives the same results database; another seed another")
    func determinism() async throws {
        let dir = TestPaths.scratchDirectory("desktop-determinism")
        let scenario = try Self.scenario(devices: 30, hours: 3)
        let first = try await DeterminismTests.digest(of: scenario, in: dir, name: "a.sqlite")
        #expect(try await DeterminismTests.digest(of: scenario, in: dir, name: "b.sqlite") == first)
        #expect(try await DeterminismTests.digest(of: scenario.overriding(seed: 9), in: dir, name: "c.sqlite") != first)
    }
}
