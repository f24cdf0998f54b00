public import LabKernel

extension VirtualDevice {
    /// Fires every timeline due at or before `now`, then executes the tick due at `now`
    /// if there is one to execute: every tick in every-tick mode, in fast-forward mode only
    /// a tick at which engine work is due. Returns whether a tick ran; the driver then runs
    /// the engine if it has work, and asks `nextWake`.
    @discardableResult
    public mutating func wake(
        at now: Instant, deviceClass: DeviceClass, env: DeviceEnvironment,
        tally: inout FleetTally, log: inout [DeviceObservation]
    ) -> Bool {
        while true {
            let (timeline, at) = earliestTimeline()
            guard at <= now.nanoseconds else { break }
            let when = Instant(nanoseconds: at)
            transition(at: when, deviceClass: deviceClass, env: env, tally: &tally, log: &log) { device, log in
                device.fire(timeline, at: when, deviceClass: deviceClass, env: env, log: &log)
            }
        }
        guard tickLoopRunning else { return false }
        switch env.mode {
        case .everyTick:
            guard nextTick == now else { return false }
        case .fastForward:
            guard workDeadline <= now else { return false }
            account(to: now, env: env, tally: &tally)
            guard nextTick == now else { return false }
        }
        executeTick(at: now, env: env, tally: &tally)
        return true
    }

    /// Wakes the device if `generation` is its current one and tells whether a tick ran;
    /// nil for a stale wake-up that an outside change superseded.
    public mutating func wakeIfCurrent(
        generation: UInt32, at now: Instant, deviceClass: DeviceClass, env: DeviceEnvironment,
        tally: inout FleetTally, log: inout [DeviceObservation]
    ) -> Bool? {
        guard generation == wakeGeneration else { return nil }
        return wake(at: now, deviceClass: deviceClass, env: env, tally: &tally, log: &log)
    }

    /// Records the engine's next work deadline and returns when to wake the device next
    /// (one mutation: reading the device through the fleet's array would copy it).
    public mutating func scheduleAfter(workDeadline: Instant, env: DeviceEnvironment) -> Instant {
        self.workDeadline = workDeadline
        plannedWake = nextWake(env)
        return plannedWake
    }

    /// Invalidates the scheduled wake-up; returns the new wake time and generation.
    public mutating func forgetScheduledWake(env: DeviceEnvironment) -> (Instant, UInt32) {
        wakeGeneration &+= 1
        plannedWake = nextWake(env)
        return (plannedWake, wakeGeneration)
    }

    /// The first wake-up of a run.
    public mutating func planFirstWake(env: DeviceEnvironment) -> Instant {
        plannedWake = nextWake(env)
        return plannedWake
    }

    /// A push reached the phone. An app the OS suspended or killed runs for a background
    /// window (`LifecycleProfile.pushWindow`, iOS's thirty seconds); one the user swiped
    /// away, or a phone that is off, does nothing.
    public mutating func wakeForPush(
        at now: Instant, deviceClass: DeviceClass, env: DeviceEnvironment,
        tally: inout FleetTally, log: inout [DeviceObservation]
    ) -> PushArrival {
        switch app {
        case .poweredOff: return .notRunning
        case .killed where killedByUser: return .notRunning
        case .foreground: return .running
        case .background where inBackgroundWindow: return .running
        case .killed, .background: break
        }
        let life = deviceClass.lifecycle
        transition(at: now, deviceClass: deviceClass, env: env, tally: &tally, log: &log) { device, log in
            if device.app == .killed {
                device.setApp(.background, cause: .pushLaunch, at: now, log: &log)
                device.enterBackground(at: now, life: life)
            }
            device.inBackgroundWindow = true
            device.windowOpensAt = now
            device.set(.backgroundWindow, now + life.pushWindow)
        }
        return .woke
    }

    /// The user opens the app (to send a message): a session in our app starts, or the one
    /// on screen switches to it. False when the phone is off.
    public mutating func openApp(
        at now: Instant, deviceClass: DeviceClass, env: DeviceEnvironment,
        tally: inout FleetTally, log: inout [DeviceObservation]
    ) -> Bool {
        switch app {
        case .poweredOff: return false
        case .foreground: return true
        case .background, .killed: break
        }
        let life = deviceClass.lifecycle
        transition(at: now, deviceClass: deviceClass, env: env, tally: &tally, log: &log) { device, log in
            if device.screen == .off {
                device.sessionStartedAt = now
                device.set(.usage, now + life.sessionLength.sampleSpan(using: &device.generator))
            }
            device.screen = .ourApp
            device.setApp(.foreground, cause: device.app == .killed ? .relaunched : .opened, at: now, log: &log)
        }
        return true
    }

    /// Takes `amount` µ% off the battery at `now`: energy the stacks spent (radio, CPU) on
    /// top of the profile's drain. Nothing while charging or off. True when the device must
    /// be woken earlier than planned (a battery threshold is now due sooner).
    public mutating func spend(_ amount: Int64, at now: Instant) -> Bool {
        guard amount > 0, !isPlugged, app != .poweredOff else { return false }
        levelBase = max(0, batteryLevel(at: now) - amount)
        levelAt = now
        refreshBatteryDeadline(at: now)
        // The spend may have jumped past a threshold: the state change is due now.
        if power != derivedPowerState(level: levelBase) || levelBase == 0 { set(.battery, now) }
        return deadline(.battery) < plannedWake.nanoseconds
    }

    /// Kills the app if it is running (a mass-app-kill fault).
    public mutating func killApp(
        at now: Instant, deviceClass: DeviceClass, env: DeviceEnvironment,
        tally: inout FleetTally, log: inout [DeviceObservation]
    ) {
        guard app == .foreground || app == .background else { return }
        transition(at: now, deviceClass: deviceClass, env: env, tally: &tally, log: &log) { device, log in
            if device.screen == .ourApp {
                device.screen = .otherApp  // the user is still looking at the phone
            }
            device.setApp(.killed, cause: .faultKill, at: now, log: &log)
        }
    }

    /// Turns the radio off or back on (a radio-off fault).
    public mutating func setRadioForcedOff(
        _ off: Bool, at now: Instant, deviceClass: DeviceClass, env: DeviceEnvironment,
        tally: inout FleetTally, log: inout [DeviceObservation]
    ) {
        transition(at: now, deviceClass: deviceClass, env: env, tally: &tally, log: &log) { device, _ in
            device.radioForcedOff = off
        }
    }

    /// The one way state changes: account the past under the old state, apply `change`,
    /// then derive what follows from it (power state, tick loop, battery slope).
    mutating func transition(
        at t: Instant, deviceClass: DeviceClass, env: DeviceEnvironment,
        tally: inout FleetTally, log: inout [DeviceObservation],
        _ change: (inout VirtualDevice, inout [DeviceObservation]) -> Void
    ) {
        account(to: t, env: env, tally: &tally)
        let networkBefore = network
        let wasRunning = tickLoopRunning
        change(&self, &log)
        let level = batteryLevel(at: t)
        let newPower = app == .poweredOff && !isPlugged ? .criticalBattery : derivedPowerState(level: level)
        if newPower != power {
            log.append(.power(from: power, to: newPower))
            power = newPower
        }
        if network != networkBefore { log.append(.network(from: networkBefore, to: network)) }
        refreshTickLoop(at: t)
        if env.reportsExecution && tickLoopRunning != wasRunning { log.append(.execution(running: tickLoopRunning)) }
        rebaseBattery(at: t, deviceClass: deviceClass)
    }

    mutating func fire(_ timeline: DeviceTimeline, at t: Instant, deviceClass: DeviceClass, env: DeviceEnvironment, log: inout [DeviceObservation]) {
        let life = deviceClass.lifecycle, power = deviceClass.power, net = deviceClass.network
        switch timeline {
        case .usage:
            if screen == .off { startSession(at: t, life: life, log: &log) } else { endSession(at: t, life: life, env: env, log: &log) }
        case .charger:
            if pluggedOvernight {
                pluggedOvernight = false
                log.append(.charger(plugged: false, overnight: true))
                scheduleNextOvernightPlug(from: t, power: power, env: env)
            } else {
                if generator.chance(power.overnightCharge) {
                    let wasPlugged = isPlugged
                    pluggedOvernight = true
                    pluggedTopUp = false
                    if !wasPlugged { log.append(.charger(plugged: true, overnight: true)) }
                    bootIfDead(at: t, life: life, env: env, log: &log)
                    set(.charger, env.clock.next(jitteredWake(power), after: t))
                } else {
                    scheduleNextOvernightPlug(from: t + .hours(1), power: power, env: env)
                }
            }
        case .topUp:
            if inTopUp {
                inTopUp = false
                if pluggedTopUp {
                    pluggedTopUp = false
                    log.append(.charger(plugged: false, overnight: false))
                }
                scheduleNextTopUp(from: t, power: power, env: env)
            } else {
                inTopUp = true
                if !isPlugged {
                    pluggedTopUp = true
                    log.append(.charger(plugged: true, overnight: false))
                    bootIfDead(at: t, life: life, env: env, log: &log)
                }
                set(.topUp, t + power.topUpLength.sampleSpan(using: &generator))
            }
        case .networkSwitch:
            access = generator.chance(net.wifiShare) ? .wifi : .cellular
            set(.networkSwitch, t + net.switchEvery.sampleSpan(using: &generator))
        case .offlineWindow:
            if inOfflineWindow {
                inOfflineWindow = false
                scheduleNextOfflineWindow(from: t, net: net)
            } else {
                inOfflineWindow = true
                set(.offlineWindow, t + net.offlineLength.sampleSpan(using: &generator))
            }
        case .backgroundWindow:
            if inBackgroundWindow {
                // A window ends (a periodic one, or one a push opened).
                inBackgroundWindow = false
                guard let every = life.backgroundEvery else { clear(.backgroundWindow); return }
                windowOpensAt = windowOpensAt + every
                set(.backgroundWindow, windowOpensAt)
            } else {
                guard life.backgroundEvery != nil else { clear(.backgroundWindow); return }
                inBackgroundWindow = true
                windowOpensAt = t
                set(.backgroundWindow, t + life.backgroundWindow)
            }
        case .osKill:
            clear(.osKill)
            if app == .background { setApp(.killed, cause: .osKill, at: t, log: &log) }
        case .battery:
            clear(.battery)
            if batteryLevel(at: t) == 0 && !isPlugged && app != .poweredOff {
                powerOff(at: t, log: &log)
            }
        }
    }

    // MARK: Sessions and lifecycle

    mutating func startSession(at t: Instant, life: LifecycleProfile, log: inout [DeviceObservation]) {
        let ours = generator.chance(life.appShare)
        screen = ours ? .ourApp : .otherApp
        set(.usage, t + life.sessionLength.sampleSpan(using: &generator))
        sessionStartedAt = t
        guard ours else { return }
        switch app {
        case .background: setApp(.foreground, cause: .opened, at: t, log: &log)
        case .killed: setApp(.foreground, cause: .relaunched, at: t, log: &log)
        case .foreground, .poweredOff: preconditionFailure("a session started while the app was \(app)")
        }
    }

    mutating func endSession(at t: Instant, life: LifecycleProfile, env: DeviceEnvironment, log: inout [DeviceObservation]) {
        let ours = screen == .ourApp
        log.append(.session(length: t - sessionStartedAt, ourApp: ours))
        screen = .off
        if ours && app == .foreground {
            if generator.chance(life.userKill) {
                setApp(.killed, cause: .userKill, at: t, log: &log)
            } else {
                setApp(.background, cause: .left, at: t, log: &log)
                enterBackground(at: t, life: life)
            }
        }
        scheduleNextSession(from: t, life: life, env: env)
    }

    /// Changes the app state and clears the timelines that only make sense in the old one.
    mutating func setApp(_ new: AppState, cause: LifecycleCause, at t: Instant, log: inout [DeviceObservation]) {
        guard new != app else { return }
        log.append(.lifecycle(from: app, to: new, cause: cause))
        killedByUser = cause == .userKill
        if app == .background {
            inBackgroundWindow = false
            clear(.backgroundWindow)
            clear(.osKill)
        }
        app = new
    }

    /// Arms the OS-kill and background-window timelines for a freshly backgrounded app.
    mutating func enterBackground(at t: Instant, life: LifecycleProfile) {
        if let killAfter = life.backgroundKillAfter {
            set(.osKill, t + killAfter.sampleSpan(using: &generator))
        }
        if let every = life.backgroundEvery {
            windowOpensAt = t + every
            set(.backgroundWindow, windowOpensAt)
        }
    }

    mutating func powerOff(at t: Instant, log: inout [DeviceObservation]) {
        if screen != .off { log.append(.session(length: t - sessionStartedAt, ourApp: screen == .ourApp)) }
        screen = .off
        setApp(.poweredOff, cause: .batteryDied, at: t, log: &log)
        clear(.usage)
    }

    mutating func bootIfDead(at t: Instant, life: LifecycleProfile, env: DeviceEnvironment, log: inout [DeviceObservation]) {
        guard app == .poweredOff else { return }
        setApp(.killed, cause: .booted, at: t, log: &log)
        scheduleNextSession(from: t, life: life, env: env)
    }
}
