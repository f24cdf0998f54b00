import Testing
import LabKernel
import LabTestSupport
@testable import Simulator

@Suite("Tick fast-forward")
struct FastForwardTests {
    /// The acceptance test of the tick scheduler: 200 devices of mixed profiles over six
    /// simulated hours count exactly the same ticks per device and power state whether
    /// idle ticks are fast-forwarded or every tick is executed as an event.
    @Test("fast-forwarded tick counts equal executing every tick, for 200 devices over 6 hours")
    func fastForwardIsExact() async throws {
        let scenario = mixedFleet(seed: 2026)
        let (fast, fastRows) = try await cpuBound { runScenario(scenario, mode: .fastForward) }
        let (every, everyRows) = try await cpuBound { runScenario(scenario, mode: .everyTick) }
        #expect(fast.devices.count == 200)
        var total: UInt64 = 0
        for (a, b) in zip(fast.devices, every.devices) {
            for state in PowerState.allCases {
                #expect(a.ticks.total(state) == b.ticks.total(state), "device ticks differ in \(state); seed 2026")
                #expect(a.ticks.executed(state) == 0, "fast-forward executes no idle tick")
                #expect(b.ticks.fastForwarded(state) == 0, "every-tick mode skips nothing")
                #expect(a.time(in: state) == b.time(in: state))
            }
            #expect(a.app == b.app && a.power == b.power && a.batteryLevel(at: .zero + .hours(6)) == b.batteryLevel(at: .zero + .hours(6)))
            total += a.ticks.total
        }
        #expect(total > 1_000_000, "the fleet really ticked: \(total)")
        // Every state is exercised, so the multipliers are part of the comparison.
        for state in PowerState.allCases {
            #expect(fast.devices.contains { $0.ticks.total(state) > 0 }, "no device ticked in \(state)")
        }
        // The per-bucket series agree too.
        for state in PowerState.allCases {
            let s = Int(state.rawValue)
            let fastSeries = fastRows.series(fast.metrics.ticksFastForwarded[s].id)
            let everySeries = everyRows.series(every.metrics.ticksExecuted[s].id)
            #expect(fastSeries.count == 24)
            #expect(fastSeries == everySeries, "\(state) per-bucket ticks")
        }
    }

    func mixedFleet(seed: UInt64) -> Scenario {
        var lowBattery = PowerProfile.presets["low-battery"]!
        lowBattery.initialLevel = .uniform(low: 2, high: 30)
        var heavyLife = LifecycleProfile.presets["heavy"]!
        heavyLife.sessionsPerDay = 120
        return Scenario(
            name: "ff", description: "", seed: seed, duration: .hours(6), startAt: .hours(20), bucket: .minutes(15),
            ticks: TickSettings(), links: LinkSettings(),
            devices: [
                population("typical", count: 80),
                population("heavy", count: 60, power: PowerProfile.presets["heavy"]!, lifecycle: heavyLife,
                           network: NetworkProfile.presets["flaky"]!),
                population("low", count: 40, power: lowBattery, lifecycle: heavyLife),
                population("background", count: 20, lifecycle: LifecycleProfile.presets["background-only"]!),
            ],
            faults: [.massAppKill(at: .hours(3), fraction: Ratio(numerator: 1, denominator: 3), population: nil)],
            thresholds: [], eventSample: 0)
    }

    func runScenario(_ scenario: Scenario, mode: TickMode) -> (FleetWorld, BatchCollector) {
        var s = scenario
        s.ticks.mode = mode
        let collector = BatchCollector()
        var kernel = Kernel(world: FleetWorld(scenario: s, sink: { collector.append($0) }), queue: EventQueue())
        kernel.queue = kernel.world.initialEvents()
        _ = kernel.run(until: .time(.zero + s.duration))
        _ = kernel.world.finish(at: .zero + s.duration)
        return (kernel.world, collector)
    }
}
