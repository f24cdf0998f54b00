import Testing
import LabKernel
@testable import Simulator

/// Runs one population through the fleet world for `duration` and returns the world.
func runFleet(_ population: Population, duration: TimeSpan, mode: TickMode = .fastForward, interval: TimeSpan = .milliseconds(100),
              startAt: TimeSpan = .hours(8), seed: UInt64 = 1, faults: [Fault] = []) -> FleetWorld {
    let scenario = Scenario(name: "t", description: "", seed: seed, duration: duration, startAt: startAt, bucket: .minutes(10),
                            ticks: TickSettings(interval: interval, mode: mode), links: LinkSettings(), devices: [population],
                            faults: faults, thresholds: [], eventSample: 100)
    var kernel = Kernel(world: FleetWorld(scenario: scenario, sink: nil), queue: EventQueue())
    kernel.queue = kernel.world.initialEvents()
    _ = kernel.run(until: .time(.zero + duration))
    _ = kernel.world.finish(at: .zero + duration)
    return kernel.world
}

extension TickSettings {
    init(interval: TimeSpan, mode: TickMode) {
        self.init()
        self.interval = interval
        self.mode = mode
    }
}

func population(_ name: String = "p", count: Int, power: PowerProfile = PowerProfile.presets["typical"]!,
                lifecycle: LifecycleProfile = LifecycleProfile.presets["typical"]!,
                network: NetworkProfile = NetworkProfile.presets["typical"]!) -> Population {
    Population(name: name, count: count, power: power, lifecycle: lifecycle, network: network)
}

@Suite("Device model")
struct VirtualDeviceTests {
    /// A device that never charges, with one fixed level and drain.
    func steadyPower(level: Double, idleDrainPercentPerHour: Int64) -> PowerProfile {
        var power = PowerProfile.presets["typical"]!
        power.initialLevel = .constant(level)
        power.drainIdle = idleDrainPercentPerHour * 1_000_000
        power.overnightCharge = .zero
        power.topUpsPerDay = 0
        return power
    }

    var quietLifecycle: LifecycleProfile {
        var life = LifecycleProfile.presets["typical"]!
        life.sessionsPerDay = 0
        life.runningAtStart = .zero
        return life
    }

    var quietNetwork: NetworkProfile {
        var net = NetworkProfile.presets["typical"]!
        net.offlinePerDay = 0
        return net
    }

    @Test("an idle battery drains linearly and crosses 20 % and 5 % at exactly the computed times")
    func batteryThresholds() {
        // 30 % at 2 %/h: LowBattery after exactly 5 h, CriticalBattery just after 12.5 h, dead at 15 h.
        let world = runFleet(population(count: 1, power: steadyPower(level: 30, idleDrainPercentPerHour: 2),
                                        lifecycle: quietLifecycle, network: quietNetwork), duration: .hours(16))
        let device = world.devices[0]
        #expect(device.app == .poweredOff)
        #expect(device.power == .criticalBattery)
        #expect(device.time(in: .unplugged) == UInt64(TimeSpan.hours(5).nanoseconds))
        // Below 5 % means at most 4.999999 %: 25.000001 points at 2 %/h, rounded up to the nanosecond.
        let critical = Int64((Int128(25_000_001) * 3_600_000_000_000 + 1_999_999) / 2_000_000)
        #expect(device.time(in: .lowBattery) == UInt64(critical - TimeSpan.hours(5).nanoseconds))
        #expect(device.time(in: .criticalBattery) == UInt64(TimeSpan.hours(15).nanoseconds - critical + TimeSpan.hours(1).nanoseconds))
        #expect(world.invariants.allHold)
    }

    @Test("a kiosk app ticks exactly once per interval, stretched by the power multiplier")
    func kioskTicks() {
        var power = steadyPower(level: 100, idleDrainPercentPerHour: 0)
        power.drainForeground = 0
        let world = runFleet(population(count: 3, power: power, lifecycle: LifecycleProfile.presets["kiosk"]!, network: quietNetwork),
                             duration: .hours(1), interval: .milliseconds(250))
        for device in world.devices {
            #expect(device.app == .foreground)
            #expect(device.ticks.total(.unplugged) == 14_400, "one tick every 250 ms for an hour")
        }
    }

    @Test("low battery halves the tick rate and critical battery quarters it")
    func multipliers() {
        var power = steadyPower(level: 12, idleDrainPercentPerHour: 0)
        power.drainForeground = 0
        let low = runFleet(population(count: 1, power: power, lifecycle: LifecycleProfile.presets["kiosk"]!, network: quietNetwork),
                           duration: .hours(1))
        #expect(low.devices[0].ticks.total(.lowBattery) == 18_000)
        power.initialLevel = .constant(3)
        let critical = runFleet(population(count: 1, power: power, lifecycle: LifecycleProfile.presets["kiosk"]!, network: quietNetwork),
                                duration: .hours(1))
        #expect(critical.devices[0].ticks.total(.criticalBattery) == 9_000)
    }

    @Test("a backgrounded app ticks only inside its background windows")
    func backgroundWindows() {
        var life = LifecycleProfile.presets["background-only"]!
        life.backgroundEvery = .minutes(15)
        life.backgroundWindow = .seconds(30)
        let world = runFleet(population(count: 5, power: steadyPower(level: 90, idleDrainPercentPerHour: 0), lifecycle: life,
                                        network: quietNetwork), duration: .hours(2))
        for device in world.devices {
            // Windows open at 15, 30, ..., 105 min: 7 windows of 30 s at 10 ticks/s, plus the one opening at 120 min is outside.
            #expect(device.ticks.total == 7 * 300)
            #expect(device.app == .background)
        }
    }

    @Test("a dead phone boots when it is plugged in, and charging shows as Charging")
    func deathAndBoot() {
        var power = steadyPower(level: 1, idleDrainPercentPerHour: 4)
        power.overnightCharge = .one
        power.overnightJitter = .zero
        var life = quietLifecycle
        life.activeFrom = .hours(7)
        life.activeUntil = .hours(23)
        life.activeJitter = .zero
        let world = runFleet(population(count: 1, power: power, lifecycle: life, network: quietNetwork),
                             duration: .hours(16), startAt: .hours(8))
        let device = world.devices[0]
        // Dead after 15 minutes; plugged in at 23:00 (15 h in), booted, charging for the last hour.
        #expect(device.power == .charging)
        #expect(device.app == .killed)
        #expect(device.time(in: .charging) == UInt64(TimeSpan.hours(1).nanoseconds))
        #expect(world.recorder.totals[world.recorder.handles(named: "lifecycle.transitions", matching: ["cause": "battery_died"])[0].id] == 1)
        #expect(world.recorder.totals[world.recorder.handles(named: "lifecycle.transitions", matching: ["cause": "booted"])[0].id] == 1)
        #expect(world.invariants.allHold)
    }

    @Test("a mass app kill stops every chosen app and the model's invariants still hold")
    func massKill() {
        var life = LifecycleProfile.presets["background-only"]!
        life.backgroundKillAfter = nil
        let world = runFleet(population(count: 200, lifecycle: life, network: quietNetwork), duration: .hours(2),
                             faults: [.massAppKill(at: .hours(1), fraction: Ratio(numerator: 1, denominator: 2), population: nil)])
        let killed = world.devices.filter { $0.app == .killed }.count
        #expect(killed > 70 && killed < 130, "about half of 200: \(killed)")
        #expect(world.invariants.allHold)
    }
}
