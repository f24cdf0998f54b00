public import LabKernel

/// The `chat:` section: devices of the populations that run the chat stack are grouped
/// into users (one to three devices each), who talk in DMs and groups through the d3chat
/// server core, with the real client core and real crypto on every device.
/// docs/scenarios.md lists the keys.
public struct ChatSettings: Sendable, Decodable {
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
    /// Devices users add and remove during the run.
    public var churn = ChatChurn()
    /// What users do besides sending.
    public var actions = ChatActions()
    /// The d3chat server's worker pool: every request, socket open and client frame takes
    /// a worker for a service time.
    public var server = ServerCapacity(workers: 8, serviceTime: .lognormal(median: 0.002, sigma: 0.5), queueLimit: 5_000)
    /// Whether the server and the phones set their history aside in temporary files:
    /// messages older than each channel's newest `messagesInMemoryPerChannel`, on the
    /// server (`MessageTable`) and in each phone's timelines (`ChatClient+Timelines`), and
    /// the server's refresh tokens once rotated or revoked (`RefreshTokenTable`). Results
    /// are the same either way (a test compares them), so a scenario does not set these.
    public var setsHistoryAside = true
    /// Four. Fewer trade time for little memory (docs/benchmarks.md): at 10,000 full-stack
    /// phones × 24 h the server keeping 2 saved 1.8 KiB a phone and cost 8–15 % more time;
    /// at 1,000, the phones keeping 2 saved 0.3 KB a phone and cost 5 %.
    public var messagesInMemoryPerChannel = 4

    enum CodingKeys: String, CodingKey, CaseIterable {
        case devices, devicesPerUser, groups, groupSize, dmsPerUser, messagesPerUserHour, groupShare, byHour, typingShare, churn, actions, server
    }

    public init() {}

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        func fail(_ key: CodingKeys, _ message: String) -> DecodingError {
            .dataCorrupted(.init(codingPath: c.codingPath + [key], debugDescription: message))
        }
        if c.contains(.devices) {
            throw fail(.devices, "which populations chat is their `stacks:` list now (e.g. stacks: [chat] under devices)")
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
        byHour = try HourWeights.decode(c, key: .byHour)
        typingShare = try c.decodeIfPresent(Ratio.self, forKey: .typingShare) ?? typingShare
        churn = try c.decodeIfPresent(ChatChurn.self, forKey: .churn) ?? churn
        actions = try c.decodeIfPresent(ChatActions.self, forKey: .actions) ?? actions
        server = try ServerCapacity.decode(c, key: .server, defaults: server)
    }

    /// The rate at the busiest hour, and the chance of keeping a draw at `hour` (thinning).
    var peakRate: Double { HourWeights.peak(messagesPerUserHour, byHour) }

    func keep(hour: Int) -> Double { HourWeights.keep(byHour, hour: hour) }
}

/// `chat.churn`: users add phones and remove them (a lost phone, removed from another of
/// their devices), each a Poisson process per user. With adds on, users of two or three
/// devices start with their last one not yet signed in; a removed phone may be added again
/// later as a new device. A user always keeps one device.
public struct ChatChurn: Sendable, Decodable, Equatable {
    public var addsPerUserDay = 0.0
    public var removesPerUserDay = 0.0

    enum CodingKeys: String, CodingKey, CaseIterable { case addsPerUserDay, removesPerUserDay }

    public init() {}

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        addsPerUserDay = try ChatActions.rate(c, .addsPerUserDay)
        removesPerUserDay = try ChatActions.rate(c, .removesPerUserDay)
    }

    public var isOn: Bool { addsPerUserDay > 0 || removesPerUserDay > 0 }
}

/// `chat.actions`: edits and deletes as shares of a user's sends, and per user per day
/// (Poisson): leaving a group (a member adds them back an hour later), paging back through
/// history, changing presence, logging out of one device (and back in one to three hours
/// later, as a new device), logging out of every device (the same).
public struct ChatActions: Sendable, Decodable, Equatable {
    public var editShare = Ratio.zero
    public var deleteShare = Ratio.zero
    public var leavesPerUserDay = 0.0
    public var historyPerUserDay = 0.0
    public var presencePerUserDay = 0.0
    public var logoutsPerUserDay = 0.0
    public var logoutAllsPerUserDay = 0.0

    enum CodingKeys: String, CodingKey, CaseIterable {
        case editShare, deleteShare, leavesPerUserDay, historyPerUserDay, presencePerUserDay, logoutsPerUserDay, logoutAllsPerUserDay
    }

    public init() {}

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        editShare = try c.decodeIfPresent(Ratio.self, forKey: .editShare) ?? .zero
        deleteShare = try c.decodeIfPresent(Ratio.self, forKey: .deleteShare) ?? .zero
        leavesPerUserDay = try Self.rate(c, .leavesPerUserDay)
        historyPerUserDay = try Self.rate(c, .historyPerUserDay)
        presencePerUserDay = try Self.rate(c, .presencePerUserDay)
        logoutsPerUserDay = try Self.rate(c, .logoutsPerUserDay)
        logoutAllsPerUserDay = try Self.rate(c, .logoutAllsPerUserDay)
    }

    /// A per-user-per-day rate: 0 (off) to 1,440 (once a minute).
    static func rate<K: CodingKey>(_ c: KeyedDecodingContainer<K>, _ key: K) throws -> Double {
        let value = try c.decodeIfPresent(Double.self, forKey: key) ?? 0
        guard (0...1_440).contains(value) else {
            throw DecodingError.dataCorrupted(.init(codingPath: c.codingPath + [key], debugDescription: "expected 0...1440 per user per day"))
        }
        return value
    }

    /// The per-day rates, by the action each schedules.
    var rates: [(ChatAction, Double)] {
        [(.leave, leavesPerUserDay), (.history, historyPerUserDay), (.presence, presencePerUserDay), (.logout, logoutsPerUserDay),
         (.logoutAll, logoutAllsPerUserDay)]
    }
}

/// What a user does on a `.chatAction` event.
enum ChatAction: UInt8, CaseIterable, Sendable {
    case addDevice, removeDevice, leave, history, presence, logout, logoutAll
}
