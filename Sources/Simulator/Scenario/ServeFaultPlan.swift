import Foundation
public import LabKernel
import Yams

/// The faults `fleetlab serve --faults FILE` plays on the wall clock against the real
/// servers: the simulator's `server-crash`, `server-slowdown` and `server-errors`, written
/// as in a scenario's `faults:` list, their `at` counted from when `serve` starts, or from
/// when the file was last saved if that is later (`serve` re-reads it when it changes).
///
/// The file is either a fault plan of its own:
///
/// ```yaml
/// every: 10m        # optional: the timetable starts over every 10 minutes
/// faults:
///   - {kind: server-slowdown, server: sync, at: 1m, duration: 2m, factor: 40}
///   - {kind: server-crash, server: chat, at: 5m, duration: 30s}
/// ```
///
/// or a scenario, whose server faults are taken (and whose servers' service times a
/// slowdown stretches); a scenario's faults that act on simulated phones or networks
/// cannot act on real ones, and are listed in `skipped`. A slowdown holds each request for
/// `factor − 1` times a service time drawn from its server's capacity model on top of the
/// real handling, which is the time the same fault adds in the simulator.
public struct ServeFaultPlan: Sendable {
    /// Server crashes, slowdowns and errors, in the file's order.
    public var faults: [Fault]
    /// The timetable's period, when it repeats.
    public var every: TimeSpan?
    /// A scenario's faults that need simulated phones or networks.
    public var skipped: [Fault] = []
    /// Each server's service time, which a slowdown stretches.
    public var serviceTimes: [StackKind: Distribution]

    /// The servers faults can hit, and their service times when the file does not say.
    static let defaultServiceTimes: [StackKind: Distribution] = [
        .sync: SyncSettings().server.serviceTime, .chat: ChatSettings().server.serviceTime,
        .agent: AgentSettings(mix: []).server.serviceTime, .aiBridge: BridgeSettings().relay.serviceTime,
    ]

    public static func load(path: String) throws(ScenarioError) -> ServeFaultPlan {
        let text = try ScenarioLoader.readText(path: path)
        if case .mapping(let root)? = try? Yams.compose(yaml: text), root["devices"] != nil {
            let scenario = try ScenarioLoader.load(path: path)
            var serviceTimes = defaultServiceTimes
            serviceTimes[.sync] = scenario.sync?.server.serviceTime ?? serviceTimes[.sync]
            serviceTimes[.chat] = scenario.chat?.server.serviceTime ?? serviceTimes[.chat]
            serviceTimes[.agent] = scenario.agent?.server.serviceTime ?? serviceTimes[.agent]
            serviceTimes[.aiBridge] = scenario.bridge?.relay.serviceTime ?? serviceTimes[.aiBridge]
            let (served, skipped) = (scenario.faults.filter(\.actsOnServer), scenario.faults.filter { !$0.actsOnServer })
            guard !served.isEmpty else {
                throw ScenarioError(file: path, path: "faults", message: "the scenario has no server-crash, server-slowdown or server-errors for the servers to play")
            }
            return ServeFaultPlan(faults: served, every: nil, skipped: skipped, serviceTimes: serviceTimes)
        }
        let file = try ScenarioLoader.decode(File.self, text: text, file: path)
        return ServeFaultPlan(faults: file.faults, every: file.every, serviceTimes: defaultServiceTimes)
    }

    /// The fault-plan file's keys.
    struct File: Decodable {
        var faults: [Fault]
        var every: TimeSpan?

        enum CodingKeys: String, CodingKey, CaseIterable { case faults, every }

        init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            // An empty list is a plan too: `serve` re-reads the file when it changes, and
            // `faults: []` is how a developer ends what it played.
            faults = try c.decode([Fault].self, forKey: .faults)
            every = try c.decodeIfPresent(TimeSpan.self, forKey: .every)
            for (index, fault) in faults.enumerated() where !fault.actsOnServer {
                throw DecodingError.dataCorrupted(.init(codingPath: c.codingPath + [CodingKeys.faults, IndexKey(index)], debugDescription:
                    "a \(fault.kind) acts on simulated phones or networks; `fleetlab serve` plays server-crash, server-slowdown and server-errors"))
            }
            if let every {
                let end = faults.map { $0.at + ($0.duration ?? .zero) }.max() ?? .zero
                guard every > .zero, end <= every else {
                    throw DecodingError.dataCorrupted(.init(codingPath: c.codingPath + [CodingKeys.every], debugDescription:
                        "the timetable repeats every \(every), but its last fault ends at \(end); make `every` at least that"))
                }
            }
        }
    }
}

extension Fault {
    /// Whether the fault acts on a server alone, so real servers can play it.
    public var actsOnServer: Bool {
        switch self {
        case .serverCrash, .serverSlowdown, .serverErrors: return true
        case .massAppKill, .radioOff, .partition, .linkSlowdown, .pushOutage: return false
        }
    }
}
