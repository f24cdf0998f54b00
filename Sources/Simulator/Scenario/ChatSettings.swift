public import LabKernel

/// The `chat:` section: devices of the named populations are grouped into users (one to
/// three devices each), who talk in DMs and groups through the d3chat server core, with
/// the real client core and real crypto on every device. docs/scenarios.md lists the keys.
public struct ChatSettings: Sendable, Decodable {
    /// Populations whose devices chat (default: all).
    public var populations: [String] = []
    /// Shares of users with 1, 2 and 3 devices.
    public var devicesPerUser: [Ratio] = [Ratio(numerator: 50, denominator: 100), Ratio(numerator: 35, denominator: 100),
                                          Ratio(numerator: 15, denominator: 100)]
    public var groups = 10
    public var groupSize = 3...12
    public var dmsPerUser = 1
    /// Messages each user sends per hour (Poisson), from whichever of their devices is online.
    public var messagesPerUserHour = 6.0
    /// Share of messages that go to a group rather than a DM.
    public var groupShare = Ratio(numerator: 70, denominator: 100)
    /// Relative message rate for each hour of the day (24 weights; the average rate stays
    /// `messagesPerUserHour`). Empty: the same all day.
    public var byHour: [Double] = []
    /// Chance a user's message is announced by `typing.start` (the server fans it out).
    public var typingShare = Ratio(numerator: 50, denominator: 100)

    enum CodingKeys: String, CodingKey, CaseIterable { case devices, devicesPerUser, groups, groupSize, dmsPerUser, messagesPerUserHour, groupShare, byHour, typingShare }

    public init() {}

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        func fail(_ key: CodingKeys, _ message: String) -> DecodingError {
            .dataCorrupted(.init(codingPath: c.codingPath + [key], debugDescription: message))
        }
        if let one = try? c.decode(String.self, forKey: .devices) { populations = [one] } else {
            populations = try c.decodeIfPresent([String].self, forKey: .devices) ?? []
        }
        if let shares = try c.decodeIfPresent([String: Ratio].self, forKey: .devicesPerUser) {
            guard Set(shares.keys).isSubset(of: ["1", "2", "3"]) else { throw fail(.devicesPerUser, "keys are 1, 2 and 3 (devices per user)") }
            devicesPerUser = ["1", "2", "3"].map { shares[$0] ?? Ratio(numerator: 0, denominator: 1) }
            let total = devicesPerUser.reduce(0.0) { $0 + $1.fraction }
            guard abs(total - 1) < 1e-9 else { throw fail(.devicesPerUser, "shares add up to \(Int((total * 100).rounded()))%, not 100%") }
        }
        groups = try c.decodeIfPresent(Int.self, forKey: .groups) ?? groups
        guard (0...100_000).contains(groups) else { throw fail(.groups, "expected 0...100000 groups") }
        if let sizes = try c.decodeIfPresent([Int].self, forKey: .groupSize) {
            guard sizes.count == 2, sizes[0] >= 2, sizes[0] <= sizes[1], sizes[1] <= 1_000 else { throw fail(.groupSize, "expected [min, max] with 2 <= min <= max <= 1000") }
            groupSize = sizes[0]...sizes[1]
        }
        dmsPerUser = try c.decodeIfPresent(Int.self, forKey: .dmsPerUser) ?? dmsPerUser
        guard (0...50).contains(dmsPerUser) else { throw fail(.dmsPerUser, "expected 0...50") }
        messagesPerUserHour = try c.decodeIfPresent(Double.self, forKey: .messagesPerUserHour) ?? messagesPerUserHour
        guard (0...3_600).contains(messagesPerUserHour) else { throw fail(.messagesPerUserHour, "expected 0...3600") }
        groupShare = try c.decodeIfPresent(Ratio.self, forKey: .groupShare) ?? groupShare
        byHour = try c.decodeIfPresent([Double].self, forKey: .byHour) ?? []
        typingShare = try c.decodeIfPresent(Ratio.self, forKey: .typingShare) ?? typingShare
        guard byHour.isEmpty || (byHour.count == 24 && byHour.allSatisfy { $0 >= 0 } && byHour.contains { $0 > 0 }) else {
            throw fail(.byHour, "24 weights, one per hour from 00:00, none negative and not all zero")
        }
    }

    /// The rate at the busiest hour, and the chance of keeping a draw at `hour` (thinning).
    var peakRate: Double {
        guard !byHour.isEmpty else { return messagesPerUserHour }
        return messagesPerUserHour * byHour.max()! / (byHour.reduce(0, +) / 24)
    }

    func keep(hour: Int) -> Double { byHour.isEmpty ? 1 : byHour[hour] / byHour.max()! }
}
