public import LabKernel

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
                       completed: host.completed.count)
    }
}
