/// The power state a device reports to its workflow engine (orch8 `reportPowerState`).
///
/// Derived from the battery: plugged in is `charging`; otherwise above 20 % is
/// `unplugged`, 5–20 % is `lowBattery` and below 5 % is `criticalBattery`. The engine
/// stretches its tick interval by `tickMultiplier`.
public enum PowerState: UInt8, CaseIterable, Sendable, Hashable, Comparable, CustomStringConvertible {
    case charging = 0
    case unplugged = 1
    case lowBattery = 2
    case criticalBattery = 3

    /// The tick interval multiplier of the orch8 seed: 1, 1, 2, 4.
    @inlinable
    public var tickMultiplier: Int64 {
        switch self {
        case .charging, .unplugged: return 1
        case .lowBattery: return 2
        case .criticalBattery: return 4
        }
    }

    /// Battery thresholds in millionths of a percent (the device model's fixed point).
    public static let lowBatteryThreshold: Int64 = 20_000_000
    public static let criticalBatteryThreshold: Int64 = 5_000_000

    /// The state for a battery level in millionths of a percent, when not plugged in.
    /// 20 % itself is `lowBattery` ("5–20 %"), 5 % itself is `lowBattery` too ("< 5 %").
    @inlinable
    public static func unpluggedState(levelMicroPercent level: Int64) -> PowerState {
        if level > lowBatteryThreshold { return .unplugged }
        if level >= criticalBatteryThreshold { return .lowBattery }
        return .criticalBattery
    }

    public static func < (lhs: PowerState, rhs: PowerState) -> Bool { lhs.rawValue < rhs.rawValue }

    /// The wire and results spelling, as the orch8 SDK names the values.
    public var description: String {
        switch self {
        case .charging: return "Charging"
        case .unplugged: return "Unplugged"
        case .lowBattery: return "LowBattery"
        case .criticalBattery: return "CriticalBattery"
        }
    }
}
