public import AgentRuntimeWire
import Foundation
public import LabKernel

/// The `agent:` section: the devices of populations that run the `agent` stack chat with
/// scripted agents of the Mozaiks runtime (docs/agent-runtime.md), through the runtime's
/// server core and the real client core. Workflows come from the `agent-workflows/`
/// folder beside the scenario; scenarios name scripted ones only (a command backend runs
/// a program, which a simulation cannot).
public struct AgentSettings: Sendable, Decodable {
    /// The workflow mix: each chat's workflow is drawn with these weights.
    public var mix: [(workflow: AgentWorkflow, weight: Double)] = []
    /// Chats each device's user starts per day (Poisson, thinned by the hour's weight).
    public var chatsPerDeviceDay = 4.0
    /// Relative chat rate for each hour of the day (24 weights); empty: the same all day.
    public var byHour: [Double] = []
    /// How long a user takes to answer the agent (after its input request), in seconds.
    public var thinkTime: Distribution = .lognormal(median: 6, sigma: 0.6)
    /// How long a user takes to answer a tool call, in seconds.
    public var toolThinkTime: Distribution = .lognormal(median: 4, sigma: 0.5)
    /// Inputs a user gives one chat before leaving it (a chat whose workflow completes
    /// earlier ends then).
    public var inputsPerChat = 6
    /// Share of chats in which the user uploads a file (1 to 64 KiB).
    public var uploadShare = Ratio(numerator: 10, denominator: 100)
    /// The runtime's worker pool: every request, socket open and client frame takes a
    /// worker for a service time.
    public var server = ServerCapacity(workers: 8, serviceTime: .lognormal(median: 0.002, sigma: 0.5), queueLimit: 5_000)

    enum CodingKeys: String, CodingKey, CaseIterable {
        case workflows, chatsPerDeviceDay, byHour, thinkTime, toolThinkTime, inputsPerChat, uploadShare, server
    }

    public init(mix: [(workflow: AgentWorkflow, weight: Double)]) { self.mix = mix }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        func fail(_ key: CodingKeys, _ message: String) -> DecodingError {
            .dataCorrupted(.init(codingPath: c.codingPath + [key], debugDescription: message))
        }
        let folder = (ScenarioLoader.currentDirectory as NSString).appendingPathComponent("agent-workflows")
        let available: [AgentWorkflow]
        do { available = try AgentWorkflowFiles.load(directory: folder) } catch { throw fail(.workflows, "\(error)") }
        let scripted = available.filter { $0.backend == .scripted }
        if let weights = try c.decodeIfPresent([String: Ratio].self, forKey: .workflows) {
            for name in weights.keys.sorted() {
                guard let workflow = available.first(where: { $0.name == name }) else {
                    throw fail(.workflows, "no workflow '\(name)' in \(folder); it has: \(scripted.map(\.name).joined(separator: ", "))")
                }
                guard workflow.backend == .scripted else {
                    throw fail(.workflows, "'\(name)' runs a program (backend: command), which a simulation cannot; name scripted workflows")
                }
                mix.append((workflow, weights[name]!.fraction))
            }
            guard mix.contains(where: { $0.weight > 0 }) else { throw fail(.workflows, "at least one workflow needs a share above 0%") }
        } else {
            guard !scripted.isEmpty else { throw fail(.workflows, "\(folder) has no scripted workflow") }
            mix = scripted.map { ($0, 1) }
        }
        chatsPerDeviceDay = try c.decodeIfPresent(Double.self, forKey: .chatsPerDeviceDay) ?? chatsPerDeviceDay
        guard (0...10_000).contains(chatsPerDeviceDay) else { throw fail(.chatsPerDeviceDay, "expected 0...10000") }
        byHour = try HourWeights.decode(c, key: .byHour)
        thinkTime = try c.decodeIfPresent(Distribution.self, forKey: .thinkTime) ?? thinkTime
        toolThinkTime = try c.decodeIfPresent(Distribution.self, forKey: .toolThinkTime) ?? toolThinkTime
        inputsPerChat = try c.decodeIfPresent(Int.self, forKey: .inputsPerChat) ?? inputsPerChat
        guard (1...1_000).contains(inputsPerChat) else { throw fail(.inputsPerChat, "expected 1...1000") }
        uploadShare = try c.decodeIfPresent(Ratio.self, forKey: .uploadShare) ?? uploadShare
        server = try ServerCapacity.decode(c, key: .server, defaults: server)
    }

    /// The rate at the busiest hour (per device per day), and the chance of keeping a
    /// draw at `hour` (thinning).
    var peakRate: Double { HourWeights.peak(chatsPerDeviceDay, byHour) }

    func keep(hour: Int) -> Double { HourWeights.keep(byHour, hour: hour) }
}
