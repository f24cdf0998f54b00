public import LabKernel

/// The `energy:` section: what the stacks' work costs a phone's battery on top of its
/// power profile (docs/energy.md). Radios cost the most: a transfer wakes the modem,
/// which stays in a high-power tail after the last byte, so ten small syncs cost far more
/// than one sync of ten times the bytes. CPU costs are per operation.
public struct EnergySettings: Sendable, Hashable, Decodable {
    public var cellular = RadioProfile(activeWatts: 1.2, tailWatts: 1.0, tail: .seconds(10), promotion: .milliseconds(260),
                                       bytesPerSecond: 1_000_000)
    public var wifi = RadioProfile(activeWatts: 0.7, tailWatts: 0.25, tail: .milliseconds(200), promotion: .zero,
                                   bytesPerSecond: 4_000_000)
    public var cpu = CPUCosts()

    enum CodingKeys: String, CodingKey, CaseIterable { case cellular, wifi, cpu }

    public init() {}

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        cellular = try RadioProfile.decode(c, key: .cellular, over: cellular)
        wifi = try RadioProfile.decode(c, key: .wifi, over: wifi)
        cpu = try c.decodeIfPresent(CPUCosts.self, forKey: .cpu) ?? cpu
    }
}

/// A radio's power model (after Huang et al., MobiSys 2012, for LTE): promotion from idle,
/// active transfer at `bytesPerSecond`, then a tail before it drops back to idle.
public struct RadioProfile: Sendable, Hashable {
    public var activeWatts: Double
    public var tailWatts: Double
    public var tail: TimeSpan
    /// Time to bring an idle radio up, at active power.
    public var promotion: TimeSpan
    public var bytesPerSecond: Double

    enum CodingKeys: String, CodingKey, CaseIterable { case activeWatts, tailWatts, tail, promotion, bytesPerSecond }

    static func decode<K: CodingKey>(_ c: KeyedDecodingContainer<K>, key: K, over base: RadioProfile) throws -> RadioProfile {
        guard c.contains(key) else { return base }
        let r = try c.nestedContainer(keyedBy: CodingKeys.self, forKey: key)
        var profile = base
        profile.activeWatts = try r.decodeIfPresent(Double.self, forKey: .activeWatts) ?? base.activeWatts
        profile.tailWatts = try r.decodeIfPresent(Double.self, forKey: .tailWatts) ?? base.tailWatts
        profile.tail = try r.decodeIfPresent(TimeSpan.self, forKey: .tail) ?? base.tail
        profile.promotion = try r.decodeIfPresent(TimeSpan.self, forKey: .promotion) ?? base.promotion
        profile.bytesPerSecond = try r.decodeIfPresent(Double.self, forKey: .bytesPerSecond) ?? base.bytesPerSecond
        for (value, name) in [(profile.activeWatts, CodingKeys.activeWatts), (profile.tailWatts, .tailWatts)] where !(0...20).contains(value) {
            throw DecodingError.dataCorrupted(.init(codingPath: r.codingPath + [name], debugDescription: "expected 0...20 watts"))
        }
        guard profile.tail >= .zero && profile.tail <= .minutes(5) else {
            throw DecodingError.dataCorrupted(.init(codingPath: r.codingPath + [CodingKeys.tail], debugDescription: "expected a tail between 0 and 5m"))
        }
        guard profile.promotion >= .zero && profile.promotion <= .seconds(10) else {
            throw DecodingError.dataCorrupted(.init(codingPath: r.codingPath + [CodingKeys.promotion], debugDescription: "expected 0...10s"))
        }
        guard profile.bytesPerSecond >= 1_000 && profile.bytesPerSecond <= 10_000_000_000 else {
            throw DecodingError.dataCorrupted(.init(codingPath: r.codingPath + [CodingKeys.bytesPerSecond], debugDescription: "expected 1000...1e10 bytes per second"))
        }
        return profile
    }
}

/// CPU energy per operation, in millijoules (a phone core at 1.5–2 W).
public struct CPUCosts: Sendable, Hashable, Decodable {
    /// One engine tick: the CPU woken for the timer and the engine's check.
    public var tick = 0.5
    /// One workflow step (a handler run and its store write).
    public var step = 2.0
    /// An X3DH handshake, either side (four X25519 and a signature check).
    public var handshake = 1.0
    /// An Ed25519 signature.
    public var sign = 0.1
    /// An Ed25519 verification.
    public var verify = 0.25
    /// JSON and AEAD over a kilobyte of traffic.
    public var kilobyte = 0.05

    enum CodingKeys: String, CodingKey, CaseIterable {
        case tickMillijoules, stepMillijoules, handshakeMillijoules, signMillijoules, verifyMillijoules, kilobyteMillijoules
    }

    public init() {}

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        func read(_ key: CodingKeys, _ base: Double) throws -> Double {
            let value = try c.decodeIfPresent(Double.self, forKey: key) ?? base
            guard (0...10_000).contains(value) else {
                throw DecodingError.dataCorrupted(.init(codingPath: c.codingPath + [key], debugDescription: "expected 0...10000 millijoules"))
            }
            return value
        }
        tick = try read(.tickMillijoules, tick)
        step = try read(.stepMillijoules, step)
        handshake = try read(.handshakeMillijoules, handshake)
        sign = try read(.signMillijoules, sign)
        verify = try read(.verifyMillijoules, verify)
        kilobyte = try read(.kilobyteMillijoules, kilobyte)
    }
}
