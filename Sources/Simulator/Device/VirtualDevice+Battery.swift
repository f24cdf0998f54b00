import LabKernel

extension VirtualDevice {
    static let nanosecondsPerHour = Int128(3_600_000_000_000)

    /// The power state for a battery level, given the charger.
    @inline(__always)
    func derivedPowerState(level: Int64) -> PowerState {
        isPlugged ? .charging : PowerState.unpluggedState(levelMicroPercent: level)
    }

    /// The battery's rate of change in the current situation (µ%/h, negative when draining):
    /// the profile's drain for the screen, plus the engine's ticks while they run (fewer in
    /// the power states that stretch the interval).
    @inline(__always)
    func currentRate(_ deviceClass: DeviceClass) -> Int64 {
        let power = deviceClass.power
        if isPlugged { return power.chargeRate }
        if app == .poweredOff { return 0 }
        let ticks = tickLoopRunning ? deviceClass.tickDrain / self.power.tickMultiplier : 0
        switch screen {
        case .ourApp: return -power.drainForeground - ticks
        case .otherApp: return -power.drainScreen - ticks
        case .off: return -power.drainIdle - ticks
        }
    }

    /// Re-bases the linear battery model at `t` when the situation changed its slope, and
    /// re-arms the threshold timeline. An unchanged slope keeps its base, so a battery that
    /// drains steadily crosses each threshold at exactly the computed instant however many
    /// unrelated transitions happen on the way.
    mutating func rebaseBattery(at t: Instant, deviceClass: DeviceClass) {
        let newRate = currentRate(deviceClass)
        if newRate != rate {
            levelBase = batteryLevel(at: t)
            levelAt = t
            rate = newRate
        }
        refreshBatteryDeadline(at: t)
    }

    /// Arms the battery timeline for the next level that changes the device's state:
    /// ≤ 20 % (low), < 5 % (critical), 0 (dead). Nothing is armed while charging.
    mutating func refreshBatteryDeadline(at t: Instant) {
        clear(.battery)
        guard rate < 0, app != .poweredOff else { return }
        let level = batteryLevel(at: t)
        let target: Int64
        if level > PowerState.lowBatteryThreshold {
            target = PowerState.lowBatteryThreshold
        } else if level >= PowerState.criticalBatteryThreshold {
            target = PowerState.criticalBatteryThreshold - 1
        } else if level > 0 {
            target = 0
        } else {
            set(.battery, t)
            return
        }
        // level(t') = base - floor(|rate| (t' - at) / H) <= target
        //   <=> t' - at >= ceil((base - target) H / |rate|)
        let needed = Int128(levelBase - target) * Self.nanosecondsPerHour
        let drain = Int128(-rate)
        let offset = (needed + drain - 1) / drain
        let at = Int128(levelAt.nanoseconds) + offset
        set(.battery, at >= Int128(Int64.max) ? Int64.max - 1 : Int64(at))
    }
}
