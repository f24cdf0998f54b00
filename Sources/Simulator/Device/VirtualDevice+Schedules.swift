import LabKernel

extension VirtualDevice {
    /// The next session start: a Poisson process that runs only in waking hours.
    mutating func scheduleNextSession(from t: Instant, life: LifecycleProfile, env: DeviceEnvironment) {
        if let at = nextArrivalInWakingHours(from: t, perDay: life.sessionsPerDay, env: env) {
            set(.usage, at)
        } else {
            clear(.usage)
        }
    }

    /// The next top-up charge: a Poisson process in waking hours.
    mutating func scheduleNextTopUp(from t: Instant, power: PowerProfile, env: DeviceEnvironment) {
        if let at = nextArrivalInWakingHours(from: t, perDay: power.topUpsPerDay, env: env) {
            set(.topUp, at)
        } else {
            clear(.topUp)
        }
    }

    /// Tonight's bedtime (plus jitter): the moment the user may put the phone on the charger.
    mutating func scheduleNextOvernightPlug(from t: Instant, power: PowerProfile, env: DeviceEnvironment) {
        guard power.overnightCharge.numerator > 0 else { clear(.charger); return }
        set(.charger, env.clock.next(jitteredSleep(power), atOrAfter: t))
    }

    /// The start of the next offline window: a Poisson process around the clock.
    mutating func scheduleNextOfflineWindow(from t: Instant, net: NetworkProfile) {
        guard net.offlinePerDay > 0 else { clear(.offlineWindow); return }
        let mean = 86_400 / net.offlinePerDay
        set(.offlineWindow, t + Distribution.exponential(mean: mean).sampleSpan(using: &generator))
    }

    mutating func jitteredWake(_ power: PowerProfile) -> Int64 { wakeTime + jitter(power.overnightJitter) }
    mutating func jitteredSleep(_ power: PowerProfile) -> Int64 { sleepTime + jitter(power.overnightJitter) }

    mutating func jitter(_ span: TimeSpan) -> Int64 {
        span.nanoseconds > 0 ? Int64(generator.next(below: UInt64(span.nanoseconds))) : 0
    }

    /// Arrivals at `perDay` per waking day. A draw that overshoots the end of the waking
    /// period restarts at the next one; by memorylessness that is exactly a Poisson
    /// process with time outside waking hours cut out.
    mutating func nextArrivalInWakingHours(from t: Instant, perDay: Double, env: DeviceEnvironment) -> Instant? {
        guard perDay > 0 else { return nil }
        let window = waking
        let gap = Distribution.exponential(mean: Double(window.length) / 1e9 / perDay)
        var start = window.contains(timeOfDay: env.clock.timeOfDay(t)) ? t : env.clock.next(window.from, atOrAfter: t)
        for _ in 0..<10_000 {
            let end = env.clock.next(window.until, after: start)
            let candidate = start + gap.sampleSpan(using: &generator)
            if candidate < end { return candidate }
            start = env.clock.next(window.from, atOrAfter: end)
        }
        return nil
    }
}
