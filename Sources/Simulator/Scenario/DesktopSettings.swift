public import LabKernel

/// The `desktop:` section: the devices of populations that run `desktop` belong to users
/// (one to three phones each) whose desktop app runs the desktop bridge on their home
/// Wi-Fi; the phones mirror and drive it while on that Wi-Fi and on screen
/// (docs/desktop-bridge.md, "Simulation").
public struct DesktopSettings: Sendable, Decodable {
    /// Shares of desktops with 1, 2 and 3 phones.
    public var phonesPerDesktop: [Ratio] = [Ratio(numerator: 50, denominator: 100), Ratio(numerator: 35, denominator: 100),
                                            Ratio(numerator: 15, denominator: 100)]
    /// Prompts each phone's user sends per day (Poisson, shaped by `byHour`); the user
    /// opens the app to send one, and the desktop must be awake and the phone at home.
    public var promptsPerPhoneDay = 12.0
    public var byHour: [Double] = []
    /// Share of prompts the user cancels mid-turn.
    public var cancelShare = Ratio(numerator: 5, denominator: 100)
    /// Share of phones speaking the legacy 0.2 dialect (the rest speak current ACP).
    public var legacyShare = Ratio(numerator: 50, denominator: 100)
    /// When desktops are awake (`awakeFrom`, `awakeUntil`, `jitter`, `asleepShare`).
    public var hours = DeskHours(awakeUntil: .hours(22))
    /// The desktop's scripted agent: time to its first thought, the tool's time, words per chunk, time between chunks.
    public var think: TimeSpan = .milliseconds(600)
    public var toolTime: TimeSpan = .milliseconds(400)
    public var wordsPerChunk = 3
    public var every: TimeSpan = .milliseconds(60)

    enum CodingKeys: String, CodingKey, CaseIterable {
        case phonesPerDesktop, promptsPerPhoneDay, byHour, cancelShare, legacyShare, awakeFrom, awakeUntil, jitter, asleepShare,
             think, toolTime, wordsPerChunk, every
    }

    public init() {}

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        func fail(_ key: CodingKeys, _ message: String) -> DecodingError {
            .dataCorrupted(.init(codingPath: c.codingPath + [key], debugDescription: message))
        }
        phonesPerDesktop = try CountShares.decode(c, key: .phonesPerDesktop, noun: "phones per desktop", defaults: phonesPerDesktop)
        promptsPerPhoneDay = try c.decodeIfPresent(Double.self, forKey: .promptsPerPhoneDay) ?? promptsPerPhoneDay
        guard (0...100_000).contains(promptsPerPhoneDay) else { throw fail(.promptsPerPhoneDay, "expected 0...100000") }
        byHour = try HourWeights.decode(c, key: .byHour)
        cancelShare = try c.decodeIfPresent(Ratio.self, forKey: .cancelShare) ?? cancelShare
        legacyShare = try c.decodeIfPresent(Ratio.self, forKey: .legacyShare) ?? legacyShare
        hours = try DeskHours(from: c, defaults: hours)
        think = try c.decodeIfPresent(TimeSpan.self, forKey: .think) ?? think
        toolTime = try c.decodeIfPresent(TimeSpan.self, forKey: .toolTime) ?? toolTime
        wordsPerChunk = try c.decodeIfPresent(Int.self, forKey: .wordsPerChunk) ?? wordsPerChunk
        guard (1...1_000).contains(wordsPerChunk) else { throw fail(.wordsPerChunk, "expected 1...1000") }
        every = try c.decodeIfPresent(TimeSpan.self, forKey: .every) ?? every
        guard think >= .zero, think <= .minutes(10), toolTime >= .zero, toolTime <= .minutes(10), every >= .zero, every <= .minutes(1) else {
            throw fail(.think, "think and toolTime ≤ 10m, every ≤ 1m")
        }
    }

    var peakRate: Double { HourWeights.peak(promptsPerPhoneDay, byHour) }
    func keep(hour: Int) -> Double { HourWeights.keep(byHour, hour: hour) }
}
