import Foundation
public import LabKernel
public import MobileSyncServer

/// The `sync:` section: devices that run workflows also sync with an orch8 mobile sync
/// server (the real server core) over the virtual network. docs/scenarios.md documents
/// every key.
public struct SyncSettings: Sendable {
    public var tenant = "fleet"
    /// The server's worker pool: requests wait in a queue when every worker is busy, and
    /// beyond `queueLimit` are refused with 503 and `Retry-After`.
    public var server = ServerCapacity(workers: 8, serviceTime: .lognormal(median: 0.004, sigma: 0.5), queueLimit: 5_000)
    /// A device gives up on a request after this long and backs off.
    public var requestTimeout: TimeSpan = .seconds(30)
    /// The cadence the server asks devices for (`sync_interval_secs`): when nothing is
    /// pending for them, and when commands are.
    public var idleInterval: TimeSpan = .seconds(30)
    public var activeInterval: TimeSpan = .seconds(5)
    /// How long an operator takes to resolve an approval on the dashboard (seconds).
    public var operatorThinkTime: Distribution = .lognormal(median: 120, sigma: 1)
    /// How the operator decides, by step id; steps not listed get their first choice.
    public var operatorAnswers: [String: AnswerModel] = [:]
    public var campaigns: [Campaign] = []
    /// How long the server keeps what is finished (`retention:`), as the deployment being
    /// planned for does: acknowledged commands 7 days, closed approvals and telemetry 30.
    public var retention = SyncRetention()
    /// Whether the server sets what is finished aside in a temporary file: statuses of
    /// ended instances, closed approvals, acknowledged commands (`SyncServerState+History`).
    /// Results are the same either way (a test compares them), so a scenario does not set it.
    public var setsHistoryAside = true

    public init() {}
}

/// A `start_workflow` the server sends to a share of the devices at one time (an
/// operator's rollout), possibly more than once with the same dedup key.
public struct Campaign: Sendable {
    public var at: TimeSpan
    public var sequence: String
    public var fraction: Ratio
    public var population: String?
    public var dedupKey: String?
    public var input: JSONValue
    /// How many commands each chosen device gets (the same dedup key each time).
    public var repeats: Int
}

extension SyncSettings: Decodable {
    enum CodingKeys: String, CodingKey, CaseIterable { case tenant, server, requestTimeout, interval, push, `operator`, campaigns, retention }
    enum RetentionKeys: String, CodingKey, CaseIterable { case acknowledgedCommands, closedApprovals, telemetry }
    enum IntervalKeys: String, CodingKey, CaseIterable { case idle, active }
    enum OperatorKeys: String, CodingKey, CaseIterable { case thinkTime, answers }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        tenant = try c.decodeIfPresent(String.self, forKey: .tenant) ?? tenant
        server = try ServerCapacity.decode(c, key: .server, defaults: server)
        requestTimeout = try c.decodeIfPresent(TimeSpan.self, forKey: .requestTimeout) ?? requestTimeout
        guard requestTimeout >= .seconds(1) else { throw Self.problem(c.codingPath + [CodingKeys.requestTimeout], "at least 1s") }
        if c.contains(.interval) {
            let i = try c.nestedContainer(keyedBy: IntervalKeys.self, forKey: .interval)
            idleInterval = try i.decodeIfPresent(TimeSpan.self, forKey: .idle) ?? idleInterval
            activeInterval = try i.decodeIfPresent(TimeSpan.self, forKey: .active) ?? activeInterval
            for (value, key) in [(idleInterval, IntervalKeys.idle), (activeInterval, .active)] where !(TimeSpan.seconds(1)...TimeSpan.hours(24)).contains(value) {
                throw Self.problem(i.codingPath + [key], "expected a whole number of seconds from 1s to 24h")
            }
        }
        if c.contains(.push) {
            throw Self.problem(c.codingPath + [CodingKeys.push], "push settings are the top-level push: section now (every stack's server uses it)")
        }
        if c.contains(.operator) {
            let o = try c.nestedContainer(keyedBy: OperatorKeys.self, forKey: .operator)
            operatorThinkTime = try o.decodeIfPresent(Distribution.self, forKey: .thinkTime) ?? operatorThinkTime
            operatorAnswers = try o.decodeIfPresent([String: AnswerModel].self, forKey: .answers) ?? [:]
        }
        campaigns = try c.decodeIfPresent([Campaign].self, forKey: .campaigns) ?? []
        if c.contains(.retention) {
            let r = try c.nestedContainer(keyedBy: RetentionKeys.self, forKey: .retention)
            retention.acknowledgedCommands = try r.decodeIfPresent(TimeSpan.self, forKey: .acknowledgedCommands) ?? retention.acknowledgedCommands
            retention.closedApprovals = try r.decodeIfPresent(TimeSpan.self, forKey: .closedApprovals) ?? retention.closedApprovals
            retention.telemetry = try r.decodeIfPresent(TimeSpan.self, forKey: .telemetry) ?? retention.telemetry
            let spans = [(retention.acknowledgedCommands, RetentionKeys.acknowledgedCommands), (retention.closedApprovals, .closedApprovals), (retention.telemetry, .telemetry)]
            for (value, key) in spans where !(TimeSpan.minutes(1)...TimeSpan.days(3650)).contains(value) {
                throw Self.problem(r.codingPath + [key], "expected 1m to 3650d")
            }
        }
    }

    static func problem(_ path: [any CodingKey], _ message: String) -> DecodingError {
        DecodingError.dataCorrupted(.init(codingPath: path, debugDescription: message))
    }
}

extension Campaign: Decodable {
    enum CodingKeys: String, CodingKey, CaseIterable { case at, sequence, fraction, devices, dedupKey, input, `repeat` }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        at = try c.decode(TimeSpan.self, forKey: .at)
        sequence = try c.decode(String.self, forKey: .sequence)
        fraction = try c.decodeIfPresent(Ratio.self, forKey: .fraction) ?? .one
        population = try c.decodeIfPresent(String.self, forKey: .devices)
        dedupKey = try c.decodeIfPresent(String.self, forKey: .dedupKey)
        input = try c.decodeIfPresent(JSONValue.self, forKey: .input) ?? [:]
        repeats = try c.decodeIfPresent(Int.self, forKey: .repeat) ?? 1
        guard input.objectValue != nil else { throw SyncSettings.problem(c.codingPath + [CodingKeys.input], "the input is a mapping") }
        guard (1...10).contains(repeats) else { throw SyncSettings.problem(c.codingPath + [CodingKeys.repeat], "expected 1...10") }
    }
}
