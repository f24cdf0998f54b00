public import LabKernel
public import DeviceWorkflows
public import WorkflowHost
import Orch8Wire

/// `fleetlab bench engine`: onboarding-flow instances with every wait answered and
/// handlers that return at once, run to completion through `EngineHost`, once over the
/// in-memory store and once over a SQLite file (WAL, one transaction per tick).
public enum EngineBenchmark {
    public struct Figures: Sendable {
        public var store: String
        public var instances: Int
        public var steps: Int
        public var ticks: Int
        public var seconds: Double
        public var completed: Int
        public var stepsPerSecond: Double { Double(steps) / seconds }
    }

    /// A store's rounds: the best one, and the spread of steps/s over all of them.
    public struct Rounds: Sendable {
        public var best: Figures
        public var slowest: Double
        public var fastest: Double { best.stepsPerSecond }
    }

    /// A store to measure: its name and how to make a fresh one for each round.
    public struct Contender {
        public var name: String
        public var make: () throws -> any WorkflowStore
        public init(name: String, make: @escaping () throws -> any WorkflowStore) {
            self.name = name
            self.make = make
        }
    }

    /// Runs every contender `rounds` times, alternating (so a slow spell of the machine
    /// falls on all of them), and keeps each one's best round.
    public static func compare(_ contenders: [Contender], rounds: Int, sequenceJSON: String, instances: Int,
                               clock: () -> Double) throws -> [Rounds] {
        var all = Array(repeating: [Figures](), count: contenders.count)
        for _ in 0..<max(1, rounds) {
            for (index, contender) in contenders.enumerated() {
                all[index].append(try run(store: try contender.make(), name: contender.name, sequenceJSON: sequenceJSON,
                                          instances: instances, clock: clock))
            }
        }
        return all.map { figures in
            let rates = figures.map(\.stepsPerSecond)
            return Rounds(best: figures[rates.firstIndex(of: rates.max()!)!], slowest: rates.min()!)
        }
    }

    public static let answers: [String: JSONValue] = [
        "show_terms": "accepted", "collect_preferences": "yes", "setup_notifications": "yes", "admin_approval": "approved",
    ]

    public static func config(instances: Int) -> MobileEngineConfig {
        var config = MobileEngineConfig()
        config.maxConcurrentInstances = UInt32(instances)
        config.maxConcurrentSteps = UInt32(instances)
        config.telemetryEnabled = true
        return config
    }

    /// Runs `instances` onboarding flows over `store`; `clock` is the driver's wall clock.
    public static func run<Store: WorkflowStore>(
        store: Store, name: String, sequenceJSON: String, instances: Int, clock: () -> Double
    ) throws -> Figures {
        var host = EngineHost(engine: MobileEngine(config: config(instances: instances), handlers: BuiltinHandlers.names, seed: StreamSeed(1)),
                              store: store)
        host.standingAnswers = answers
        host.recordsRuns = false
        _ = try host.loadSequence(json: sequenceJSON)
        let started = clock()
        for _ in 0..<instances { _ = try host.start("onboarding-flow") }
        let ticks = try host.runUntilIdle()
        let seconds = clock() - started
        return Figures(store: name, instances: instances, steps: host.handlerRunCount, ticks: ticks, seconds: seconds,
                       completed: host.completedOutputs.count)
    }
}
