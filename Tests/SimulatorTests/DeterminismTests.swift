import Foundation
import Testing
import LabKernel
import LabStore
import LabTestSupport
@testable import Simulator

@Suite("Determinism")
struct DeterminismTests {
    /// Runs `scenario` into `dir/name` and returns the digest of its results database.
    static func digest(of scenario: Scenario, in dir: URL, name: String) async throws -> String {
        let path = dir.appendingPathComponent(name).path
        return try await cpuBound {
            _ = try FleetRun(scenario: scenario, resultsPath: path).run()
            return try ResultsDigest.compute(ResultsDatabase.open(at: path))
        }
    }

    @Test("same scenario and seed give identical results; another seed does not (the full-stack demo, a quarter of its phones, through its chat server crash)")
    func digestsRepeat() async throws {
        let dir = TestPaths.scratchDirectory()
        let smoke = try ScenarioLoader.load(path: TestPaths.packageRoot.appendingPathComponent("simulations/smoke.yaml").path)
            .overriding(devices: 250, duration: .hours(3) + .minutes(20))
        let first = try await Self.digest(of: smoke, in: dir, name: "a.sqlite")
        let second = try await Self.digest(of: smoke, in: dir, name: "b.sqlite")
        #expect(first == second, "replay with: fleetlab simulate simulations/smoke.yaml --seed \(smoke.seed)")
        let other = try await Self.digest(of: smoke.overriding(seed: smoke.seed + 1), in: dir, name: "c.sqlite")
        #expect(other != first)
    }

    @Test("adding a population leaves every existing device's life unchanged")
    func populationsAreIndependent() throws {
        var scenario = try ScenarioLoader.parse(text: """
            name: t
            seed: 77
            duration: 3h
            devices:
              - {name: phones, count: 50}
            """, file: "t.yaml")
        let alone = runFleet(scenario.devices[0], duration: .hours(3), seed: 77)
        scenario.devices.insert(Population(name: "tablets", count: 25, power: PowerProfile.presets["heavy"]!,
                                           lifecycle: LifecycleProfile.presets["heavy"]!, network: NetworkProfile.presets["flaky"]!), at: 0)
        var kernel = Kernel(world: FleetWorld(scenario: scenario, sink: nil), queue: EventQueue())
        kernel.queue = kernel.world.initialEvents()
        _ = kernel.run(until: .time(.zero + .hours(3)))
        let phones = kernel.world.devices.filter { kernel.world.classes[Int($0.classIndex)].name == "phones" }
        #expect(phones.count == 50)
        for (a, b) in zip(alone.devices, phones) {
            #expect(a.ticks == b.ticks && a.app == b.app && a.power == b.power)
            #expect(a.batteryLevel(at: .zero + .hours(3)) == b.batteryLevel(at: .zero + .hours(3)))
        }
    }
}
