import LabKernel

extension DeviceClass {
    /// The resolved profile parameters as canonical JSON, stored with the results so a
    /// dashboard shows what each population really was.
    public var parametersJSON: String {
        func percent(_ microPercent: Int64) -> JSONValue { .number(Double(microPercent) / 1_000_000) }
        func dist(_ d: Distribution) -> JSONValue {
            switch d {
            case .constant(let v): return ["constant": .number(v)]
            case .uniform(let low, let high): return ["uniform": [.number(low), .number(high)]]
            case .exponential(let mean): return ["exponential": .number(mean)]
            case .lognormal(let median, let sigma): return ["lognormal": ["median": .number(median), "sigma": .number(sigma)]]
            case .empirical(let points): return ["empirical": .array(points.map { [.number($0.probability), .number($0.value)] })]
            }
        }
        let value: JSONValue = [
            "power": [
                "initialLevel": dist(power.initialLevel),
                "drainPerHour": ["foreground": percent(power.drainForeground), "screen": percent(power.drainScreen),
                                 "idle": percent(power.drainIdle)],
                "chargePerHour": percent(power.chargeRate),
                "overnightCharge": .string(power.overnightCharge.description),
                "overnightJitter": .string(power.overnightJitter.description),
                "topUpsPerDay": .number(power.topUpsPerDay),
                "topUpLength": dist(power.topUpLength),
                "capacityWh": .number(power.capacityWh),
            ],
            "lifecycle": [
                "activeFrom": .string(lifecycle.activeFrom.description),
                "activeUntil": .string(lifecycle.activeUntil.description),
                "activeJitter": .string(lifecycle.activeJitter.description),
                "sessionsPerDay": .number(lifecycle.sessionsPerDay),
                "sessionLength": dist(lifecycle.sessionLength),
                "appShare": .string(lifecycle.appShare.description),
                "userKill": .string(lifecycle.userKill.description),
                "backgroundKillAfter": lifecycle.backgroundKillAfter.map(dist) ?? "never",
                "backgroundRefresh": lifecycle.backgroundEvery.map {
                    ["every": .string($0.description), "window": .string(lifecycle.backgroundWindow.description)]
                } ?? "never",
                "runningAtStart": .string(lifecycle.runningAtStart.description),
                "foregroundAtStart": .string(lifecycle.foregroundAtStart.description),
                "pushWindow": .string(lifecycle.pushWindow.description),
            ],
            "network": [
                "wifiShare": .string(network.wifiShare.description),
                "switchEvery": dist(network.switchEvery),
                "offlinePerDay": .number(network.offlinePerDay),
                "offlineLength": dist(network.offlineLength),
            ],
            "stacks": .array(stacks.sorted().map { .string($0.rawValue) }),
        ]
        return value.canonicalText
    }
}
