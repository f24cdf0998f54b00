public import LabKernel

/// The app process as the OS sees it.
public enum AppState: UInt8, CaseIterable, Sendable, Hashable, CustomStringConvertible {
    /// On screen; the engine ticks.
    case foreground = 0
    /// Alive but not visible; the engine ticks only inside background windows.
    case background = 1
    /// Not running (swiped away or reclaimed by the OS); the next session relaunches it.
    case killed = 2
    /// The whole device is off: its battery ran out. Charging boots it.
    case poweredOff = 3

    public var description: String {
        switch self {
        case .foreground: return "foreground"
        case .background: return "background"
        case .killed: return "killed"
        case .poweredOff: return "powered_off"
        }
    }
}

/// What is on the screen.
public enum Screen: UInt8, Sendable, Hashable {
    case off = 0
    case ourApp = 1
    case otherApp = 2
}

/// The device's radio as the network sees it.
public enum NetworkState: UInt8, CaseIterable, Sendable, Hashable, CustomStringConvertible {
    case wifi = 0
    case cellular = 1
    case offline = 2

    public var description: String {
        switch self {
        case .wifi: return "wifi"
        case .cellular: return "cellular"
        case .offline: return "offline"
        }
    }
}

/// Why the app changed lifecycle state.
public enum LifecycleCause: UInt8, CaseIterable, Sendable, Hashable, CustomStringConvertible {
    /// The user opened the app while it was alive in the background.
    case opened = 0
    /// The user opened the app while it was not running: a cold start.
    case relaunched = 1
    /// The user left the app.
    case left = 2
    /// The user swiped the app away.
    case userKill = 3
    /// The OS reclaimed the backgrounded process.
    case osKill = 4
    /// The battery ran out.
    case batteryDied = 5
    /// A dead device was plugged in and booted.
    case booted = 6
    /// A scenario fault (mass app kill).
    case faultKill = 7
    /// A push woke the app that the OS had killed: it runs in the background for a window.
    case pushLaunch = 8

    public var description: String {
        switch self {
        case .opened: return "opened"
        case .relaunched: return "relaunched"
        case .left: return "left"
        case .userKill: return "user_kill"
        case .osKill: return "os_kill"
        case .batteryDied: return "battery_died"
        case .booted: return "booted"
        case .faultKill: return "fault_kill"
        case .pushLaunch: return "push_launch"
        }
    }
}

/// Something a device did that the recorder wants to know about.
public enum DeviceObservation: Sendable, Hashable {
    case lifecycle(from: AppState, to: AppState, cause: LifecycleCause)
    case power(from: PowerState, to: PowerState)
    case charger(plugged: Bool, overnight: Bool)
    case network(from: NetworkState, to: NetworkState)
    case session(length: TimeSpan, ourApp: Bool)
    /// The app began or stopped running code (foreground, or a background window): what
    /// the stacks may do follows it. Reported only when `DeviceEnvironment.reportsExecution`.
    case execution(running: Bool)
}

/// What a push did to the phone it reached.
public enum PushArrival: Int, Sendable, Hashable, CaseIterable {
    /// The app was suspended or killed by the OS: it now runs for a background window.
    case woke
    /// The app was already running code.
    case running
    /// Nothing runs: the user swiped the app away, or the phone is off.
    case notRunning
}

/// The device model's independent timelines. Each has at most one pending deadline;
/// ties at one instant fire in this order, which is part of the determinism contract.
public enum DeviceTimeline: Int, CaseIterable, Sendable {
    case usage = 0
    case charger = 1
    case topUp = 2
    case networkSwitch = 3
    case offlineWindow = 4
    case backgroundWindow = 5
    case osKill = 6
    case battery = 7
}

/// How ticks are driven.
public enum TickMode: String, Sendable, Hashable, CaseIterable {
    /// Idle ticks are counted in bulk between device events (the default).
    case fastForward = "fast-forward"
    /// Every tick is an event of its own (the reference the fast-forward is checked against).
    case everyTick = "every-tick"
}

/// Ticks counted for one device, per power state.
public struct TickCounts: Hashable, Sendable {
    public var executed: (UInt32, UInt32, UInt32, UInt32) = (0, 0, 0, 0)
    public var fastForwarded: (UInt32, UInt32, UInt32, UInt32) = (0, 0, 0, 0)

    public init() {}

    public func executed(_ state: PowerState) -> UInt64 { UInt64(Self.get(executed, state)) }
    public func fastForwarded(_ state: PowerState) -> UInt64 { UInt64(Self.get(fastForwarded, state)) }
    public func total(_ state: PowerState) -> UInt64 { executed(state) + fastForwarded(state) }
    public var total: UInt64 { PowerState.allCases.reduce(0) { $0 + total($1) } }

    mutating func addExecuted(_ state: PowerState, _ n: UInt32) { Self.add(&executed, state, n) }
    mutating func addFastForwarded(_ state: PowerState, _ n: UInt32) { Self.add(&fastForwarded, state, n) }

    static func get(_ t: (UInt32, UInt32, UInt32, UInt32), _ s: PowerState) -> UInt32 {
        switch s {
        case .charging: return t.0
        case .unplugged: return t.1
        case .lowBattery: return t.2
        case .criticalBattery: return t.3
        }
    }

    static func add(_ t: inout (UInt32, UInt32, UInt32, UInt32), _ s: PowerState, _ n: UInt32) {
        switch s {
        case .charging: t.0 &+= n
        case .unplugged: t.1 &+= n
        case .lowBattery: t.2 &+= n
        case .criticalBattery: t.3 &+= n
        }
    }

    public static func == (a: TickCounts, b: TickCounts) -> Bool {
        PowerState.allCases.allSatisfy { a.executed($0) == b.executed($0) && a.fastForwarded($0) == b.fastForwarded($0) }
    }

    public func hash(into hasher: inout Hasher) {
        for s in PowerState.allCases {
            hasher.combine(executed(s))
            hasher.combine(fastForwarded(s))
        }
    }
}

/// Fleet-wide accumulators the device model adds to as time passes; the world turns them
/// into series at each bucket boundary.
public struct FleetTally: Sendable {
    public var ticksExecuted = [UInt64](repeating: 0, count: 4)
    public var ticksFastForwarded = [UInt64](repeating: 0, count: 4)
    /// Device-nanoseconds spent in each power state (all devices).
    public var deviceTime = [UInt64](repeating: 0, count: 4)
    /// Device-nanoseconds in each power state with the tick loop running.
    public var activeTime = [UInt64](repeating: 0, count: 4)

    public init() {}

    public mutating func reset() {
        for i in 0..<4 {
            ticksExecuted[i] = 0
            ticksFastForwarded[i] = 0
            deviceTime[i] = 0
            activeTime[i] = 0
        }
    }
}
