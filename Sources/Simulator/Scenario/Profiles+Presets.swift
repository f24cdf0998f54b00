import LabKernel

extension PowerProfile {
    /// Named battery behaviours; a scenario picks one by name and may override any field.
    public static let presets: [String: PowerProfile] = [
        "typical": PowerProfile(
            initialLevel: .uniform(low: 25, high: 100), drainForeground: 14_000_000, drainScreen: 10_000_000,
            drainIdle: 700_000, chargeRate: 45_000_000, overnightCharge: Ratio(numerator: 85, denominator: 100),
            overnightJitter: .minutes(45), topUpsPerDay: 0.6, topUpLength: .lognormal(median: 1_500, sigma: 0.6), capacityWh: 13),
        "heavy": PowerProfile(
            initialLevel: .uniform(low: 15, high: 90), drainForeground: 18_000_000, drainScreen: 14_000_000,
            drainIdle: 1_000_000, chargeRate: 40_000_000, overnightCharge: Ratio(numerator: 90, denominator: 100),
            overnightJitter: .minutes(45), topUpsPerDay: 1.2, topUpLength: .lognormal(median: 1_500, sigma: 0.6), capacityWh: 17),
        "light": PowerProfile(
            initialLevel: .uniform(low: 50, high: 100), drainForeground: 10_000_000, drainScreen: 8_000_000,
            drainIdle: 400_000, chargeRate: 50_000_000, overnightCharge: Ratio(numerator: 70, denominator: 100),
            overnightJitter: .minutes(60), topUpsPerDay: 0.2, topUpLength: .lognormal(median: 1_800, sigma: 0.6), capacityWh: 11),
        "low-battery": PowerProfile(
            initialLevel: .uniform(low: 3, high: 25), drainForeground: 16_000_000, drainScreen: 12_000_000,
            drainIdle: 1_000_000, chargeRate: 35_000_000, overnightCharge: Ratio(numerator: 50, denominator: 100),
            overnightJitter: .minutes(90), topUpsPerDay: 0.3, topUpLength: .lognormal(median: 1_200, sigma: 0.6), capacityWh: 11),
    ]
}

extension LifecycleProfile {
    /// Named usage patterns.
    public static let presets: [String: LifecycleProfile] = [
        "typical": LifecycleProfile(
            activeFrom: .hours(7), activeUntil: .hours(23), activeJitter: .hours(1), sessionsPerDay: 50,
            sessionLength: .lognormal(median: 90, sigma: 1.0), appShare: Ratio(numerator: 12, denominator: 100),
            userKill: Ratio(numerator: 5, denominator: 100), backgroundKillAfter: .exponential(mean: 10_800),
            backgroundEvery: .minutes(15), backgroundWindow: .seconds(30), runningAtStart: Ratio(numerator: 60, denominator: 100),
            foregroundAtStart: Ratio(numerator: 2, denominator: 100)),
        "heavy": LifecycleProfile(
            activeFrom: .hours(7), activeUntil: .hours(24), activeJitter: .hours(1), sessionsPerDay: 80,
            sessionLength: .lognormal(median: 120, sigma: 1.0), appShare: Ratio(numerator: 30, denominator: 100),
            userKill: Ratio(numerator: 3, denominator: 100), backgroundKillAfter: .exponential(mean: 14_400),
            backgroundEvery: .minutes(15), backgroundWindow: .seconds(30), runningAtStart: Ratio(numerator: 80, denominator: 100),
            foregroundAtStart: Ratio(numerator: 5, denominator: 100)),
        "light": LifecycleProfile(
            activeFrom: .hours(8), activeUntil: .hours(22), activeJitter: .hours(1), sessionsPerDay: 25,
            sessionLength: .lognormal(median: 60, sigma: 1.0), appShare: Ratio(numerator: 5, denominator: 100),
            userKill: Ratio(numerator: 10, denominator: 100), backgroundKillAfter: .exponential(mean: 5_400),
            backgroundEvery: .minutes(30), backgroundWindow: .seconds(30), runningAtStart: Ratio(numerator: 30, denominator: 100)),
        "background-only": LifecycleProfile(
            activeFrom: .hours(7), activeUntil: .hours(23), activeJitter: .hours(1), sessionsPerDay: 50,
            sessionLength: .lognormal(median: 90, sigma: 1.0), appShare: .zero, userKill: .zero,
            backgroundKillAfter: nil, backgroundEvery: .minutes(15), backgroundWindow: .seconds(30), runningAtStart: .one),
        "kiosk": LifecycleProfile(
            activeFrom: .zero, activeUntil: .zero, activeJitter: .zero, sessionsPerDay: 1,
            sessionLength: .constant(3_153_600_000), appShare: .one, userKill: .zero,
            backgroundKillAfter: nil, backgroundEvery: nil, backgroundWindow: .zero, runningAtStart: .one,
            foregroundAtStart: .one),
    ]
}

extension NetworkProfile {
    /// Named radio behaviours.
    public static let presets: [String: NetworkProfile] = [
        "typical": NetworkProfile(wifiShare: Ratio(numerator: 60, denominator: 100), switchEvery: .exponential(mean: 5_400),
                                  offlinePerDay: 1.5, offlineLength: .lognormal(median: 240, sigma: 1.0)),
        "wifi-only": NetworkProfile(wifiShare: .one, switchEvery: .exponential(mean: 86_400),
                                    offlinePerDay: 0.2, offlineLength: .lognormal(median: 120, sigma: 1.0)),
        "cellular": NetworkProfile(wifiShare: .zero, switchEvery: .exponential(mean: 86_400),
                                   offlinePerDay: 3, offlineLength: .lognormal(median: 180, sigma: 1.0)),
        "flaky": NetworkProfile(wifiShare: Ratio(numerator: 40, denominator: 100), switchEvery: .exponential(mean: 1_200),
                                offlinePerDay: 12, offlineLength: .lognormal(median: 120, sigma: 1.0)),
    ]
}
