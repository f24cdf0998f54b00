public import LabKernel

/// Profiles in a scenario are a preset name ("typical") or a mapping that starts from a
/// preset (`preset:`, default "typical") and overrides single fields.
private func presetName<K: CodingKey>(_ decoder: any Decoder, _ keys: K.Type, presetKey: K) throws -> (String, KeyedDecodingContainer<K>?) {
    if let single = try? decoder.singleValueContainer(), let name = try? single.decode(String.self) {
        return (name, nil)
    }
    let c = try decoder.container(keyedBy: K.self)
    return (try c.decodeIfPresent(String.self, forKey: presetKey) ?? "typical", c)
}

private func lookup<P>(_ name: String, in presets: [String: P], _ decoder: any Decoder, what: String) throws -> P {
    guard let preset = presets[name] else {
        throw DecodingError.dataCorrupted(.init(
            codingPath: decoder.codingPath,
            debugDescription: "unknown \(what) preset '\(name)'; expected one of: \(presets.keys.sorted().joined(separator: ", "))"))
    }
    return preset
}

private func bad(_ path: [any CodingKey], _ message: String) -> DecodingError {
    DecodingError.dataCorrupted(.init(codingPath: path, debugDescription: message))
}

/// Percent per hour as µ%/h.
private func microPercent<K: CodingKey>(_ c: KeyedDecodingContainer<K>, _ key: K, range: ClosedRange<Double>) throws -> Int64? {
    guard let value = try c.decodeIfPresent(Double.self, forKey: key) else { return nil }
    guard range.contains(value) else {
        throw bad(c.codingPath + [key], "expected a percentage per hour in \(Int(range.lowerBound))...\(Int(range.upperBound)), found \(value)")
    }
    return Int64((value * 1_000_000).rounded())
}

extension PowerProfile: Decodable {
    enum CodingKeys: String, CodingKey, CaseIterable {
        case preset, initialLevel, drainPerHour, chargePerHour, overnightCharge, overnightJitter, topUpsPerDay, topUpLength, capacityWh
    }

    enum DrainKeys: String, CodingKey, CaseIterable { case foreground, screen, idle }

    public init(from decoder: any Decoder) throws {
        let (name, container) = try presetName(decoder, CodingKeys.self, presetKey: .preset)
        self = try lookup(name, in: Self.presets, decoder, what: "power")
        guard let c = container else { return }
        if let level = try c.decodeIfPresent(Distribution.self, forKey: .initialLevel) {
            if case .constant(let v) = level, v > 100 { throw bad(c.codingPath + [CodingKeys.initialLevel], "a battery level is at most 100") }
            initialLevel = level
        }
        if c.contains(.drainPerHour) {
            let d = try c.nestedContainer(keyedBy: DrainKeys.self, forKey: .drainPerHour)
            drainForeground = try microPercent(d, .foreground, range: 0...1_000) ?? drainForeground
            drainScreen = try microPercent(d, .screen, range: 0...1_000) ?? drainScreen
            drainIdle = try microPercent(d, .idle, range: 0...1_000) ?? drainIdle
        }
        chargeRate = try microPercent(c, .chargePerHour, range: 0.1...1_000) ?? chargeRate
        overnightCharge = try c.decodeIfPresent(Ratio.self, forKey: .overnightCharge) ?? overnightCharge
        overnightJitter = try c.decodeIfPresent(TimeSpan.self, forKey: .overnightJitter) ?? overnightJitter
        topUpsPerDay = try c.decodeIfPresent(Double.self, forKey: .topUpsPerDay) ?? topUpsPerDay
        topUpLength = try c.decodeIfPresent(Distribution.self, forKey: .topUpLength) ?? topUpLength
        capacityWh = try c.decodeIfPresent(Double.self, forKey: .capacityWh) ?? capacityWh
        guard (1...200).contains(capacityWh) else { throw bad(c.codingPath + [CodingKeys.capacityWh], "expected 1...200 watt-hours") }
        guard topUpsPerDay >= 0 && topUpsPerDay <= 1_000 else { throw bad(c.codingPath + [CodingKeys.topUpsPerDay], "expected 0...1000 per day") }
        guard overnightJitter >= .zero && overnightJitter <= .hours(12) else {
            throw bad(c.codingPath + [CodingKeys.overnightJitter], "expected a jitter between 0 and 12h")
        }
    }
}

extension LifecycleProfile: Decodable {
    enum CodingKeys: String, CodingKey, CaseIterable {
        case preset, activeHours, activeJitter, sessionsPerDay, sessionLength, appShare, userKill,
             backgroundKillAfter, backgroundRefresh, pushWindow, runningAtStart, foregroundAtStart
    }

    enum RefreshKeys: String, CodingKey, CaseIterable { case every, window }

    public init(from decoder: any Decoder) throws {
        let (name, container) = try presetName(decoder, CodingKeys.self, presetKey: .preset)
        self = try lookup(name, in: Self.presets, decoder, what: "lifecycle")
        guard let c = container else { return }
        if let hours = try c.decodeIfPresent(String.self, forKey: .activeHours) {
            guard let window = Self.parseHours(hours) else {
                throw bad(c.codingPath + [CodingKeys.activeHours], "expected waking hours like 07:00-23:00, found '\(hours)'")
            }
            (activeFrom, activeUntil) = window
        }
        activeJitter = try c.decodeIfPresent(TimeSpan.self, forKey: .activeJitter) ?? activeJitter
        sessionsPerDay = try c.decodeIfPresent(Double.self, forKey: .sessionsPerDay) ?? sessionsPerDay
        sessionLength = try c.decodeIfPresent(Distribution.self, forKey: .sessionLength) ?? sessionLength
        appShare = try c.decodeIfPresent(Ratio.self, forKey: .appShare) ?? appShare
        userKill = try c.decodeIfPresent(Ratio.self, forKey: .userKill) ?? userKill
        runningAtStart = try c.decodeIfPresent(Ratio.self, forKey: .runningAtStart) ?? runningAtStart
        foregroundAtStart = try c.decodeIfPresent(Ratio.self, forKey: .foregroundAtStart) ?? foregroundAtStart
        pushWindow = try c.decodeIfPresent(TimeSpan.self, forKey: .pushWindow) ?? pushWindow
        guard pushWindow >= .seconds(1) && pushWindow <= .minutes(10) else {
            throw bad(c.codingPath + [CodingKeys.pushWindow], "expected a push window between 1s and 10m")
        }
        if c.contains(.backgroundKillAfter) {
            if (try? c.decode(String.self, forKey: .backgroundKillAfter)) == "never" {
                backgroundKillAfter = nil
            } else {
                backgroundKillAfter = try c.decode(Distribution.self, forKey: .backgroundKillAfter)
            }
        }
        if c.contains(.backgroundRefresh) {
            if (try? c.decode(String.self, forKey: .backgroundRefresh)) == "never" {
                backgroundEvery = nil
            } else {
                let r = try c.nestedContainer(keyedBy: RefreshKeys.self, forKey: .backgroundRefresh)
                backgroundEvery = try r.decodeIfPresent(TimeSpan.self, forKey: .every) ?? backgroundEvery
                backgroundWindow = try r.decodeIfPresent(TimeSpan.self, forKey: .window) ?? backgroundWindow
                if let every = backgroundEvery, every <= backgroundWindow || backgroundWindow <= .zero {
                    throw bad(r.codingPath, "a background window must be longer than 0 and shorter than its period")
                }
            }
        }
        guard activeJitter >= .zero && activeJitter <= .hours(6) else {
            throw bad(c.codingPath + [CodingKeys.activeJitter], "expected a jitter between 0 and 6h")
        }
        guard sessionsPerDay >= 0 && sessionsPerDay <= 10_000 else {
            throw bad(c.codingPath + [CodingKeys.sessionsPerDay], "expected 0...10000 sessions per day")
        }
    }

    /// "07:00-23:00" as offsets into the day; "00:00-00:00" is the whole day.
    static func parseHours(_ text: String) -> (TimeSpan, TimeSpan)? {
        let parts = text.split(separator: "-")
        guard parts.count == 2, let from = parseTimeOfDay(String(parts[0])), let until = parseTimeOfDay(String(parts[1])) else { return nil }
        return (from, until)
    }
}

/// "08:00" or "08:00:30" as an offset into the day; "24:00" is accepted as midnight.
public func parseTimeOfDay(_ text: String) -> TimeSpan? {
    let parts = text.trimmingWhitespace().split(separator: ":")
    guard (2...3).contains(parts.count), parts.allSatisfy({ $0.count == 2 }),
          let h = Int64(parts[0]), let m = Int64(parts[1]), h <= 24, m < 60 else { return nil }
    let s = parts.count == 3 ? Int64(parts[2]) : 0
    guard let s, s < 60, h < 24 || (m == 0 && s == 0) else { return nil }
    return .hours(h) + .minutes(m) + .seconds(s)
}

extension NetworkProfile: Decodable {
    enum CodingKeys: String, CodingKey, CaseIterable { case preset, wifiShare, switchEvery, offlinePerDay, offlineLength }

    public init(from decoder: any Decoder) throws {
        let (name, container) = try presetName(decoder, CodingKeys.self, presetKey: .preset)
        self = try lookup(name, in: Self.presets, decoder, what: "network")
        guard let c = container else { return }
        wifiShare = try c.decodeIfPresent(Ratio.self, forKey: .wifiShare) ?? wifiShare
        switchEvery = try c.decodeIfPresent(Distribution.self, forKey: .switchEvery) ?? switchEvery
        offlinePerDay = try c.decodeIfPresent(Double.self, forKey: .offlinePerDay) ?? offlinePerDay
        offlineLength = try c.decodeIfPresent(Distribution.self, forKey: .offlineLength) ?? offlineLength
        guard offlinePerDay >= 0 && offlinePerDay <= 10_000 else {
            throw bad(c.codingPath + [CodingKeys.offlinePerDay], "expected 0...10000 offline windows per day")
        }
        if case .constant(let v) = switchEvery, v <= 0 {
            throw bad(c.codingPath + [CodingKeys.switchEvery], "the time between radio switches must be positive")
        }
    }
}
