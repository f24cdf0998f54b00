public import LabKernel

extension VirtualDevice {
    /// Accounts everything between the last accounting point and `t` under the current
    /// state: device time per power state and, in fast-forward mode, the ticks that fell
    /// in [cursor, t). Pure counting: no randomness, no state change.
    public mutating func account(to t: Instant, env: DeviceEnvironment, tally: inout FleetTally) {
        let span = t.nanoseconds - stateSince.nanoseconds
        guard span >= 0 else { preconditionFailure("accounting backwards: \(t) < \(stateSince)") }
        let state = Int(power.rawValue)
        tally.deviceTime[state] &+= UInt64(span)
        switch power {
        case .charging: timeInState.0 &+= UInt64(span)
        case .unplugged: timeInState.1 &+= UInt64(span)
        case .lowBattery: timeInState.2 &+= UInt64(span)
        case .criticalBattery: timeInState.3 &+= UInt64(span)
        }
        if tickLoopRunning {
            tally.activeTime[state] &+= UInt64(span)
            if nextTick < t {
                switch env.mode {
                case .fastForward:
                    let interval = tickInterval(env)
                    let count = (t.nanoseconds - nextTick.nanoseconds - 1) / interval + 1
                    nextTick = Instant(nanoseconds: nextTick.nanoseconds + count * interval)
                    ticks.addFastForwarded(power, UInt32(count))
                    tally.ticksFastForwarded[state] &+= UInt64(count)
                case .everyTick:
                    preconditionFailure("every-tick mode left a tick at \(nextTick) unexecuted before \(t)")
                }
            }
        }
        stateSince = t
    }

    /// Runs the tick due at `t` as an event of its own.
    mutating func executeTick(at t: Instant, env: DeviceEnvironment, tally: inout FleetTally) {
        precondition(tickLoopRunning && nextTick == t, "a tick ran outside the tick loop")
        account(to: t, env: env, tally: &tally)
        ticks.addExecuted(power, 1)
        tally.ticksExecuted[Int(power.rawValue)] &+= 1
        nextTick = t + TimeSpan(nanoseconds: tickInterval(env))
    }

    /// Starts or stops the tick loop to match the app state; the loop's first tick is at
    /// the instant it starts.
    mutating func refreshTickLoop(at t: Instant) {
        let shouldRun = app == .foreground || (app == .background && inBackgroundWindow)
        if shouldRun && !tickLoopRunning {
            tickLoopRunning = true
            nextTick = t
        } else if !shouldRun && tickLoopRunning {
            tickLoopRunning = false
            nextTick = .distantFuture
        }
    }
}
