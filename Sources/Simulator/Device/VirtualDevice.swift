public import LabKernel

/// Run-wide facts every device reads.
public struct DeviceEnvironment: Sendable {
    public var clock: DayClock
    /// The engine's `tickIntervalMs` in nanoseconds, before the power multiplier.
    public var tickInterval: Int64
    public var mode: TickMode
    /// Whether devices log `.execution` observations (a stack follows them).
    public var reportsExecution = false

    public init(clock: DayClock, tickInterval: TimeSpan, mode: TickMode, reportsExecution: Bool = false) {
        self.clock = clock
        self.tickInterval = tickInterval.nanoseconds
        self.mode = mode
        self.reportsExecution = reportsExecution
    }
}

/// One simulated phone: battery, screen, app lifecycle, radio and the engine's tick loop.
///
/// Theory of operation. A device is a set of independent timelines (`DeviceTimeline`),
/// each with one pending deadline: the next session start or end, charger plug or
/// unplug, top-up, radio switch, offline window edge, background window edge, OS kill,
/// and the next battery threshold crossing. Between deadlines nothing changes except the
/// battery level, which is linear in time and therefore computed, not stepped. The driver
/// wakes the device at `nextWake`; the device fires every due timeline in (time,
/// timeline) order, each through `transition`, which first accounts the time and ticks
/// that passed under the old state and then applies the change.
///
/// Ticks. While the app is in the foreground, or alive in a background window, the
/// engine ticks every `tickInterval × powerState.tickMultiplier`; after a tick at t the
/// next is at t + interval(state at t); the loop's first tick is at the instant it starts.
/// In `.fastForward` mode ticks are never events: `account(to:)` counts how many fell in
/// [cursor, t) in closed form. In `.everyTick` mode each tick is a wake-up of its own.
/// State changes at an instant take effect before a tick at that same instant, in both
/// modes, which is what makes the two modes count identically.
///
/// Randomness comes only from the device's own stream and only inside transitions, never
/// from ticks or accounting, so both tick modes draw the same numbers in the same order.
/// Battery levels are integers (µ%) and threshold crossings are solved exactly.
public struct VirtualDevice: Sendable {
    // Timeline deadlines, indexed by DeviceTimeline (a tuple keeps them inline).
    var deadlines: (Int64, Int64, Int64, Int64, Int64, Int64, Int64, Int64)
    var generator: SeededGenerator
    /// Battery level (µ%) at `levelAt`, changing at `rate` µ%/h until the next transition.
    var levelBase: Int64
    var levelAt: Instant
    var rate: Int64
    var stateSince: Instant
    var nextTick: Instant
    /// This device's waking hours (time of day) after its personal jitter.
    var wakeTime: Int64
    var sleepTime: Int64
    var windowOpensAt: Instant
    var sessionStartedAt: Instant = .zero
    public internal(set) var ticks = TickCounts()
    /// Nanoseconds this device spent in each power state, by `PowerState.rawValue`.
    public internal(set) var timeInState: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
    public let classIndex: UInt16
    public internal(set) var app: AppState
    public internal(set) var screen: Screen = .off
    public internal(set) var access: AccessKind
    public internal(set) var power: PowerState = .unplugged
    var pluggedOvernight = false
    var pluggedTopUp = false
    var inTopUp = false
    var inBackgroundWindow = false
    /// The user swiped the app away: a push does not relaunch it (iOS's rule).
    var killedByUser = false
    var inOfflineWindow = false
    var radioForcedOff = false
    public internal(set) var tickLoopRunning = false
    /// Bumped whenever the driver must forget a scheduled wake-up.
    public var wakeGeneration: UInt32 = 0
    /// When the device's workflow engine next has work (`MobileEngine.nextDeadline`);
    /// in fast-forward mode the first tick at or after it is executed, the rest are counted.
    public var workDeadline: Instant = .distantFuture
    /// When the driver's pending wake-up for this device is due (what `nextWake` said
    /// when it was scheduled): a change that needs an earlier one must reschedule.
    public internal(set) var plannedWake: Instant = .distantFuture

    static let never = Int64.max

    public var isPlugged: Bool {
        @inline(__always) get { pluggedOvernight || pluggedTopUp }
    }
    public var network: NetworkState {
        @inline(__always) get {
            (app == .poweredOff || inOfflineWindow || radioForcedOff) ? .offline : (access == .wifi ? .wifi : .cellular)
        }
    }

    /// Draws the device's initial state at t = 0 from its own stream.
    public init(deviceClass: DeviceClass, classIndex: UInt16, seed: StreamSeed, environment env: DeviceEnvironment) {
        var g = seed.generator()
        let powerProfile = deviceClass.power, life = deviceClass.lifecycle, net = deviceClass.network
        let percent = min(100, powerProfile.initialLevel.sample(using: &g))
        let jitter = life.activeJitter.nanoseconds
        let shift = jitter > 0 ? g.next(in: -jitter...jitter) : 0
        self.wakeTime = life.activeFrom.nanoseconds + shift
        self.sleepTime = life.activeUntil.nanoseconds + shift
        self.levelBase = Int64((percent * 1_000_000).rounded())
        self.levelAt = .zero
        self.rate = 0
        self.stateSince = .zero
        self.nextTick = .distantFuture
        self.windowOpensAt = .distantFuture
        self.classIndex = classIndex
        self.access = g.chance(net.wifiShare) ? .wifi : .cellular
        self.app = g.chance(life.runningAtStart) ? .background : .killed
        self.deadlines = (Self.never, Self.never, Self.never, Self.never, Self.never, Self.never, Self.never, Self.never)
        self.generator = g

        let tod = env.clock.timeOfDay(.zero)
        if !waking.contains(timeOfDay: tod), generator.chance(powerProfile.overnightCharge) {
            pluggedOvernight = true
            set(.charger, env.clock.next(jitteredWake(powerProfile), atOrAfter: .zero))
        } else {
            scheduleNextOvernightPlug(from: .zero, power: powerProfile, env: env)
        }
        if generator.chance(life.foregroundAtStart) {
            app = .foreground
            screen = .ourApp
            set(.usage, .zero + life.sessionLength.sampleSpan(using: &generator))
        } else {
            scheduleNextSession(from: .zero, life: life, env: env)
        }
        scheduleNextTopUp(from: .zero, power: powerProfile, env: env)
        set(.networkSwitch, .zero + net.switchEvery.sampleSpan(using: &generator))
        scheduleNextOfflineWindow(from: .zero, net: net)
        if app == .background { enterBackground(at: .zero, life: life) }
        power = derivedPowerState(level: levelBase)
        refreshTickLoop(at: .zero)
        rate = currentRate(deviceClass)
        refreshBatteryDeadline(at: .zero)
    }

    // MARK: Reading the state

    /// The battery level at `t` (µ%), which must not be before the last transition.
    @inline(__always)
    public func batteryLevel(at t: Instant) -> Int64 {
        let elapsed = Int128(t.nanoseconds - levelAt.nanoseconds)
        let delta = Int64(Int128(rate) * elapsed / Int128(3_600_000_000_000))
        return min(PowerProfile.full, max(0, levelBase + delta))
    }

    var waking: DailyWindow { DailyWindow(from: wakeTime, until: sleepTime) }

    @inline(__always)
    func deadline(_ timeline: DeviceTimeline) -> Int64 {
        switch timeline {
        case .usage: return deadlines.0
        case .charger: return deadlines.1
        case .topUp: return deadlines.2
        case .networkSwitch: return deadlines.3
        case .offlineWindow: return deadlines.4
        case .backgroundWindow: return deadlines.5
        case .osKill: return deadlines.6
        case .battery: return deadlines.7
        }
    }

    mutating func set(_ timeline: DeviceTimeline, _ at: Instant) { set(timeline, at.nanoseconds) }

    mutating func set(_ timeline: DeviceTimeline, _ at: Int64) {
        switch timeline {
        case .usage: deadlines.0 = at
        case .charger: deadlines.1 = at
        case .topUp: deadlines.2 = at
        case .networkSwitch: deadlines.3 = at
        case .offlineWindow: deadlines.4 = at
        case .backgroundWindow: deadlines.5 = at
        case .osKill: deadlines.6 = at
        case .battery: deadlines.7 = at
        }
    }

    mutating func clear(_ timeline: DeviceTimeline) { set(timeline, Self.never) }

    /// The earliest pending timeline (ties go to the lower timeline number).
    @inline(__always)
    func earliestTimeline() -> (DeviceTimeline, Int64) {
        var best = DeviceTimeline.usage
        var bestAt = deadlines.0
        for timeline in DeviceTimeline.allCases.dropFirst() {
            let at = deadline(timeline)
            if at < bestAt {
                best = timeline
                bestAt = at
            }
        }
        return (best, bestAt)
    }

    /// When the driver must wake this device next.
    @inline(__always)
    public func nextWake(_ env: DeviceEnvironment) -> Instant {
        let timelines = earliestTimeline().1
        guard tickLoopRunning else { return Instant(nanoseconds: timelines) }
        switch env.mode {
        case .everyTick:
            return Instant(nanoseconds: min(timelines, nextTick.nanoseconds))
        case .fastForward:
            guard workDeadline < .distantFuture else { return Instant(nanoseconds: timelines) }
            return Instant(nanoseconds: min(timelines, firstTick(atOrAfter: workDeadline, env).nanoseconds))
        }
    }

    /// The first tick of the current lattice at or after `t` (the interval may change at
    /// the next state change, which wakes the device anyway).
    @inline(__always)
    func firstTick(atOrAfter t: Instant, _ env: DeviceEnvironment) -> Instant {
        guard t > nextTick else { return nextTick }
        let interval = tickInterval(env)
        let steps = (t.nanoseconds - nextTick.nanoseconds + interval - 1) / interval
        return Instant(nanoseconds: nextTick.nanoseconds + steps * interval)
    }

    /// Nanoseconds spent in `state` so far (up to the last accounting point).
    @inline(__always)
    public func time(in state: PowerState) -> UInt64 {
        switch state {
        case .charging: return timeInState.0
        case .unplugged: return timeInState.1
        case .lowBattery: return timeInState.2
        case .criticalBattery: return timeInState.3
        }
    }

    /// The tick interval in the current power state.
    @inline(__always)
    func tickInterval(_ env: DeviceEnvironment) -> Int64 { env.tickInterval * power.tickMultiplier }
}
