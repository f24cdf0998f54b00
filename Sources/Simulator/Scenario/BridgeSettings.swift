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
    /// When desktops are awake (`awakeFrom`, `awakeUntil`, `jitter`, `asleepShare`).
    public var hours = DeskHours()
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
        phonesPerUser = try CountShares.decode(c, key: .phonesPerUser, noun: "phones per user", defaults: phonesPerUser)
        promptsPerPhoneDay = try c.decodeIfPresent(Double.self, forKey: .promptsPerPhoneDay) ?? promptsPerPhoneDay
        guard (0...100_000).contains(promptsPerPhoneDay) else { throw fail(.promptsPerPhoneDay, "expected 0...100000") }
        byHour = try HourWeights.decode(c, key: .byHour)
        wholeShare = try c.decodeIfPresent(Ratio.self, forKey: .wholeShare) ?? wholeShare
        sealedShare = try c.decodeIfPresent(Ratio.self, forKey: .sealedShare) ?? sealedShare
        hours = try DeskHours(from: c, defaults: hours)
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

    var peakRate: Double { HourWeights.peak(promptsPerPhoneDay, byHour) }

    func keep(hour: Int) -> Double { HourWeights.keep(byHour, hour: hour) }
}
