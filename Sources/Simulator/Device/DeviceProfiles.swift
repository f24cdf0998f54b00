public import LabKernel

/// Battery behaviour of a device class. Levels and rates are in millionths of a percent
/// (µ%) so the battery is integer arithmetic end to end.
public struct PowerProfile: Hashable, Sendable {
    /// Battery level at the start of the run, in percent.
    public var initialLevel: Distribution
    /// Drain per hour while our app is on screen.
    public var drainForeground: Int64
    /// Drain per hour while the screen shows another app.
    public var drainScreen: Int64
    /// Drain per hour with the screen off.
    public var drainIdle: Int64
    /// Charge per hour while plugged in.
    public var chargeRate: Int64
    /// Chance the device is put on the charger at bedtime.
    public var overnightCharge: Ratio
    /// Plug-in happens at bedtime plus up to this much; unplug at wake-up plus up to this much.
    public var overnightJitter: TimeSpan
    /// Random top-up charges per day, during waking hours.
    public var topUpsPerDay: Double
    /// How long a top-up lasts, in seconds.
    public var topUpLength: Distribution
    /// The battery's capacity in watt-hours: what converts the stacks' energy into percent.
    public var capacityWh: Double = 13

    public static let microPercentPerPercent: Int64 = 1_000_000
    public static let full: Int64 = 100 * microPercentPerPercent
}

/// How the user and the OS treat the app.
public struct LifecycleProfile: Hashable, Sendable {
    /// Waking hours as offsets into the day; sessions and top-ups happen only then.
    public var activeFrom: TimeSpan
    public var activeUntil: TimeSpan
    /// Each device's waking hours are shifted by up to ± this much (drawn once).
    public var activeJitter: TimeSpan
    /// Screen sessions per day (any app).
    public var sessionsPerDay: Double
    /// Length of a screen session, in seconds.
    public var sessionLength: Distribution
    /// Chance a session is spent in our app.
    public var appShare: Ratio
    /// Chance the user swipes the app away when leaving it.
    public var userKill: Ratio
    /// How long the OS lets a backgrounded app live before killing it, in seconds; nil
    /// means never.
    public var backgroundKillAfter: Distribution?
    /// Background execution windows (iOS background refresh): one of `backgroundWindow`
    /// every `backgroundEvery` while the app lives in the background; nil means none.
    public var backgroundEvery: TimeSpan?
    public var backgroundWindow: TimeSpan
    /// How long a push lets a suspended (or OS-killed) app run in the background.
    public var pushWindow: TimeSpan = .seconds(30)
    /// Chance the app process is alive (in the background) when the run starts.
    public var runningAtStart: Ratio
    /// Chance the user is in our app when the run starts (a session already under way).
    public var foregroundAtStart: Ratio = .zero
}

/// Which radio the device uses and when it has none.
public struct NetworkProfile: Hashable, Sendable {
    /// Share of time on Wi-Fi rather than cellular.
    public var wifiShare: Ratio
    /// Time between re-choosing Wi-Fi or cellular, in seconds.
    public var switchEvery: Distribution
    /// Offline windows per day (tunnels, flights, dead zones).
    public var offlinePerDay: Double
    /// Length of an offline window, in seconds.
    public var offlineLength: Distribution
}

/// One population of a scenario with its profiles resolved to numbers.
///
/// A class, not a struct: every wake-up of every device reads its class, and handing a
/// reference over costs a retain where copying the profiles (with their distribution
/// tables) costs a value-witness copy. It is immutable, so sharing it is safe.
public final class DeviceClass: Sendable {
    public let name: String
    public let count: Int
    /// Index of this class's first device in the fleet's device array.
    public let firstDevice: Int
    public let power: PowerProfile
    public let lifecycle: LifecycleProfile
    public let network: NetworkProfile
    /// The client stacks its devices run.
    public let stacks: Set<StackKind>
    /// Drain per hour (µ%) of the engine's ticks at the full tick rate (the multiplier of
    /// a power state divides it); zero when the devices run no engine.
    public let tickDrain: Int64
    /// Battery µ% per joule of the stacks' energy.
    public let microPercentPerJoule: Double

    public init(name: String, count: Int, firstDevice: Int, power: PowerProfile, lifecycle: LifecycleProfile, network: NetworkProfile,
                stacks: Set<StackKind> = [], tickInterval: TimeSpan = .milliseconds(100), cpu: CPUCosts = CPUCosts()) {
        self.name = name
        self.count = count
        self.firstDevice = firstDevice
        self.power = power
        self.lifecycle = lifecycle
        self.network = network
        self.stacks = stacks
        microPercentPerJoule = Double(PowerProfile.full) / (power.capacityWh * 3_600)
        let ticksPerHour = 3_600e9 / Double(max(1, tickInterval.nanoseconds))
        tickDrain = stacks.contains(.workflows) ? Int64((ticksPerHour * cpu.tick / 1_000 * microPercentPerJoule).rounded()) : 0
    }
}
