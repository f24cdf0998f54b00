public import LabKernel

/// The `bridge:` section: the devices of populations that run `ai-bridge` belong to users
/// (one to three phones each) who each have a desktop running the bridge daemon; the phones
/// pair with it through the relay and send prompts (docs/ai-bridge.md, "Simulation").
public struct BridgeSettings: Sendable, Decodable {
    /// Shares of users with 1, 2 and 3 phones.
    public var phonesPerUser: [Ratio] = [Ratio(numerator: 60, denominator: 100), Ratio(numerator: 30, denominator: 100),
                                         Ratio(numerator: 10, denominator: 100)]
    /// Prompts each phone sends per day (Poisson, shaped by `byHour`); the user opens the app to send one.
    public var promptsPerPhoneDay = 20.0
    public var byHour: [Double] = []
    /// Share of prompts sent with `stream: false` (one response instead of a stream).
    public var wholeShare = Ratio(numerator: 10, denominator: 100)
    /// Share of phones that seal their requests to the daemon (the rest send plaintext envelopes).
    public var sealedShare = Ratio.one
    /// When desktops are awake: from `awakeFrom` to `awakeUntil` (each user's own times drawn
    /// within `jitter`), and a `asleepShare` of days a desktop stays closed.
    public var awakeFrom: TimeSpan = .hours(8)
    public var awakeUntil: TimeSpan = .hours(23)
    public var jitter: TimeSpan = .hours(1)
    public var asleepShare = Ratio(numerator: 10, denominator: 100)
    /// Daemon restarts (an update, a crash) per awake desktop per day: a new key pair, so
    /// its phones must pair again.
    public var restartsPerDay = 0.2
    /// How long after a 401 the user walks to the desk and pairs again (when the desktop is awake).
    public var repairDelay: Distribution = .lognormal(median: 600, sigma: 0.8)
    /// The daemon's scripted model: think time before the first chunk, words per chunk, time between chunks.
    public var think: TimeSpan = .milliseconds(800)
    public var wordsPerChunk = 3
    public var every: TimeSpan = .milliseconds(50)
    /// The relay's worker pool: every phone request takes a worker for a service time.
    public var relay = ServerCapacity(workers: 8, serviceTime: .lognormal(median: 0.001, sigma: 0.5), queueLimit: 5_000)

    enum CodingKeys: String, CodingKey, CaseIterable {
        case phonesPerUser, promptsPerPhoneDay, byHour, wholeShare, sealedShare, awakeFrom, awakeUntil, jitter, asleepShare, restartsPerDay,
             repairDelay, think, wordsPerChunk, every, relay
    }

    public init() {}

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        func fail(_ key: CodingKeys, _ message: String) -> DecodingError {
            .dataCorrupted(.init(codingPath: c.codingPath + [key], debugDescription: message))
        }
        if let shares = try c.decodeIfPresent([String: Ratio].self, forKey: .phonesPerUser) {
            guard Set(shares.keys).isSubset(of: ["1", "2", "3"]) else { throw fail(.phonesPerUser, "keys are 1, 2 and 3 (phones per user)") }
            phonesPerUser = ["1", "2", "3"].map { shares[$0] ?? .zero }
            let total = phonesPerUser.reduce(0.0) { $0 + $1.fraction }
            guard abs(total - 1) < 1e-9 else { throw fail(.phonesPerUser, "shares add up to \(Int((total * 100).rounded()))%, not 100%") }
        }
        promptsPerPhoneDay = try c.decodeIfPresent(Double.self, forKey: .promptsPerPhoneDay) ?? promptsPerPhoneDay
        guard (0...100_000).contains(promptsPerPhoneDay) else { throw fail(.promptsPerPhoneDay, "expected 0...100000") }
        byHour = try c.decodeIfPresent([Double].self, forKey: .byHour) ?? []
        guard byHour.isEmpty || (byHour.count == 24 && byHour.allSatisfy { $0 >= 0 } && byHour.contains { $0 > 0 }) else {
            throw fail(.byHour, "24 weights, one per hour from 00:00, none negative and not all zero")
        }
        wholeShare = try c.decodeIfPresent(Ratio.self, forKey: .wholeShare) ?? wholeShare
        sealedShare = try c.decodeIfPresent(Ratio.self, forKey: .sealedShare) ?? sealedShare
        for key in [CodingKeys.awakeFrom, .awakeUntil] {
            guard let text = try c.decodeIfPresent(String.self, forKey: key) else { continue }
            guard let time = text == "24:00" ? .hours(24) : parseTimeOfDay(text) else { throw fail(key, "expected a time of day like 08:00, found '\(text)'") }
            if key == .awakeFrom { awakeFrom = time } else { awakeUntil = time }
        }
        guard awakeFrom >= .zero, awakeUntil <= .hours(24), awakeFrom < awakeUntil else {
            throw fail(.awakeUntil, "awakeFrom < awakeUntil, both within the day (e.g. 08:00 and 23:00)")
        }
        jitter = try c.decodeIfPresent(TimeSpan.self, forKey: .jitter) ?? jitter
        guard jitter >= .zero, jitter <= .hours(6) else { throw fail(.jitter, "0 to 6h") }
        asleepShare = try c.decodeIfPresent(Ratio.self, forKey: .asleepShare) ?? asleepShare
        restartsPerDay = try c.decodeIfPresent(Double.self, forKey: .restartsPerDay) ?? restartsPerDay
        guard (0...1_000).contains(restartsPerDay) else { throw fail(.restartsPerDay, "expected 0...1000") }
        repairDelay = try c.decodeIfPresent(Distribution.self, forKey: .repairDelay) ?? repairDelay
        think = try c.decodeIfPresent(TimeSpan.self, forKey: .think) ?? think
        wordsPerChunk = try c.decodeIfPresent(Int.self, forKey: .wordsPerChunk) ?? wordsPerChunk
        guard (1...1_000).contains(wordsPerChunk) else { throw fail(.wordsPerChunk, "expected 1...1000") }
        every = try c.decodeIfPresent(TimeSpan.self, forKey: .every) ?? every
        guard think >= .zero, think <= .minutes(10), every >= .zero, every <= .minutes(1) else { throw fail(.think, "think ≤ 10m, every ≤ 1m") }
        relay = try ServerCapacity.decode(c, key: .relay, defaults: relay)
    }

    var peakRate: Double {
        guard !byHour.isEmpty else { return promptsPerPhoneDay }
        return promptsPerPhoneDay * byHour.max()! / (byHour.reduce(0, +) / 24)
    }

    func keep(hour: Int) -> Double { byHour.isEmpty ? 1 : byHour[hour] / byHour.max()! }
}
