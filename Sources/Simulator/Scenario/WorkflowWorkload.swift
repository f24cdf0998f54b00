import Foundation
public import LabKernel
public import DeviceWorkflows
public import Orch8Wire

/// The `workflows:` section of a scenario: what the devices' engines run and how the
/// people and handlers around them behave. docs/scenarios.md documents every key.
public struct WorkflowSettings: Sendable {
    public var workloads: [WorkflowWorkload] = []
    /// Handler behaviour by handler name; `default` covers the rest.
    public var handlers: [String: HandlerModel] = [:]
    public var defaultHandler = HandlerModel.default
    public var engine = MobileEngineConfig.simulationDefault
    /// Modelled CPU time to advance one instance in a tick; with it, a tick stops at
    /// `maxTickDurationMs` and leaves the rest for the next one. Zero: ticks never yield.
    public var instanceCost: TimeSpan = .zero

    public init() {}

    public func handler(_ name: String) -> HandlerModel { handlers[name] ?? defaultHandler }
}

/// One kind of workflow started on the devices of some populations.
public struct WorkflowWorkload: Sendable {
    /// The sequence's own name (from its JSON), which the engine starts.
    public var sequenceName: String
    /// The sequence's JSON, read from `simulations/workflows/<name>.json` (or a path).
    public var sequenceJSON: String
    /// Extra sequences its sub_sequence blocks use.
    public var extraSequences: [String]
    /// Populations whose devices run it; empty means all.
    public var populations: [String]
    public var start: StartRate
    public var input: JSONValue
    /// How users answer each waiting step, by step id; steps not listed get `AnswerModel.default`.
    public var answers: [String: AnswerModel]
    /// Every handler its sequences name.
    public var handlerNames: Set<String> = []
}

/// How often a device starts a workflow.
public enum StartRate: Sendable, Equatable {
    /// Exactly every period, from a random phase.
    case every(TimeSpan)
    /// A Poisson process with this mean gap.
    case poisson(TimeSpan)
}

/// How a person answers a waiting step.
public struct AnswerModel: Sendable, Equatable {
    /// Choice values with their probabilities, in order; empty means the step's first choice.
    public var choices: [(value: String, ratio: Ratio)]
    /// Time from the prompt to the answer, in seconds.
    public var thinkTime: Distribution
    /// Chance nobody ever answers.
    public var neverAnswer: Ratio

    public static let `default` = AnswerModel(choices: [], thinkTime: .lognormal(median: 30, sigma: 1), neverAnswer: .zero)

    public static func == (a: AnswerModel, b: AnswerModel) -> Bool {
        a.choices.map(\.value) == b.choices.map(\.value) && a.choices.map(\.ratio) == b.choices.map(\.ratio)
            && a.thinkTime == b.thinkTime && a.neverAnswer == b.neverAnswer
    }
}

/// How a handler behaves: how long it takes, and how often it fails.
public struct HandlerModel: Sendable, Equatable {
    /// Seconds.
    public var duration: Distribution
    /// Chance an attempt fails (retryably: the step's retry policy applies).
    public var failureRate: Ratio

    public static let `default` = HandlerModel(duration: .lognormal(median: 0.05, sigma: 0.5), failureRate: .zero)
}

extension MobileEngineConfig {
    /// The engine settings of simulated devices: the SDK's defaults, except that finished
    /// instances are collected after an hour (a day of them on every device of a large
    /// fleet would be gigabytes of history nobody reads).
    public static var simulationDefault: MobileEngineConfig {
        var config = MobileEngineConfig()
        config.maxInstanceLifetimeSecs = 3_600
        config.telemetryEnabled = false
        return config
    }
}

extension WorkflowSettings: Decodable {
    enum CodingKeys: String, CodingKey, CaseIterable { case run, handlers, engine }
    enum EngineKeys: String, CodingKey, CaseIterable {
        case maxConcurrentSteps, maxConcurrentInstances, maxStepsPerInstance, handlerTimeout, maxInstanceLifetime, inputGate, telemetry
        case maxTickDuration, instanceCost
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        workloads = try c.decode([WorkflowWorkload].self, forKey: .run)
        if c.contains(.handlers) {
            let models = try c.decode([String: HandlerModel].self, forKey: .handlers)
            let used = workloads.reduce(into: Set<String>()) { $0.formUnion($1.handlerNames) }
            for (name, model) in models.sorted(by: { $0.key < $1.key }) {
                if name == "default" { defaultHandler = model; continue }
                guard used.contains(name) else {
                    throw DecodingError.dataCorrupted(.init(codingPath: c.codingPath + [CodingKeys.handlers],
                        debugDescription: "no sequence of this scenario uses a handler named '\(name)'; they use: \(used.sorted().joined(separator: ", "))"))
                }
                handlers[name] = model
            }
        }
        if c.contains(.engine) {
            let e = try c.nestedContainer(keyedBy: EngineKeys.self, forKey: .engine)
            if let v = try e.decodeIfPresent(UInt32.self, forKey: .maxConcurrentSteps) { engine.maxConcurrentSteps = max(1, v) }
            if let v = try e.decodeIfPresent(UInt32.self, forKey: .maxConcurrentInstances) { engine.maxConcurrentInstances = max(1, v) }
            if let v = try e.decodeIfPresent(UInt32.self, forKey: .maxStepsPerInstance) { engine.maxStepsPerInstance = max(1, v) }
            if let v = try e.decodeIfPresent(TimeSpan.self, forKey: .handlerTimeout) { engine.handlerTimeoutMs = UInt64(max(1, v.milliseconds)) }
            if let v = try e.decodeIfPresent(TimeSpan.self, forKey: .maxInstanceLifetime) {
                engine.maxInstanceLifetimeSecs = UInt64(max(1, v.nanoseconds / 1_000_000_000))
            }
            if let v = try e.decodeIfPresent(Bool.self, forKey: .telemetry) { engine.telemetryEnabled = v }
            if let v = try e.decodeIfPresent(TimeSpan.self, forKey: .maxTickDuration) { engine.maxTickDurationMs = UInt64(max(1, v.milliseconds)) }
            if let v = try e.decodeIfPresent(TimeSpan.self, forKey: .instanceCost) { instanceCost = max(.zero, v) }
            if let gate = try e.decodeIfPresent(String.self, forKey: .inputGate) {
                guard let value = InputGate(rawValue: gate) else {
                    throw DecodingError.dataCorrupted(.init(codingPath: e.codingPath + [EngineKeys.inputGate],
                                                            debugDescription: "expected after-handler or before-handler, found '\(gate)'"))
                }
                engine.inputGate = value
            }
        }
    }
}

extension WorkflowWorkload: Decodable {
    enum CodingKeys: String, CodingKey, CaseIterable { case sequence, load, devices, start, input, answers }
    enum StartKeys: String, CodingKey, CaseIterable { case every, poisson }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let reference = try c.decode(String.self, forKey: .sequence)
        let directory = ScenarioLoader.currentDirectory
        sequenceJSON = try Self.read(reference, directory: directory, path: c.codingPath + [CodingKeys.sequence])
        let loads = try c.decodeIfPresent([String].self, forKey: .load) ?? []
        extraSequences = try loads.enumerated().map { index, name in
            try Self.read(name, directory: directory, path: c.codingPath + [CodingKeys.load, IndexKey(index)])
        }
        if let names = try? c.decode([String].self, forKey: .devices) {
            populations = names
        } else {
            populations = try c.decodeIfPresent(String.self, forKey: .devices).map { [$0] } ?? []
        }
        let s = try c.nestedContainer(keyedBy: StartKeys.self, forKey: .start)
        if let every = try s.decodeIfPresent(TimeSpan.self, forKey: .every), !s.contains(.poisson) {
            start = .every(every)
        } else if let mean = try s.decodeIfPresent(TimeSpan.self, forKey: .poisson), !s.contains(.every) {
            start = .poisson(mean)
        } else {
            throw DecodingError.dataCorrupted(.init(codingPath: s.codingPath, debugDescription: "start is {every: 20m} or {poisson: 20m}"))
        }
        if case .every(let gap) = start, gap < .seconds(1) { throw Self.problem(s.codingPath, "a start period is at least 1s") }
        if case .poisson(let gap) = start, gap < .seconds(1) { throw Self.problem(s.codingPath, "a mean gap is at least 1s") }
        input = try c.decodeIfPresent(JSONValue.self, forKey: .input) ?? [:]
        guard input.objectValue != nil else { throw Self.problem(c.codingPath + [CodingKeys.input], "the input is a mapping") }
        answers = try c.decodeIfPresent([String: AnswerModel].self, forKey: .answers) ?? [:]
        let sequence = try Self.compile(sequenceJSON, reference: reference, path: c.codingPath + [CodingKeys.sequence])
        sequenceName = sequence.name
        var loaded = [sequence]
        for (index, json) in extraSequences.enumerated() {
            loaded.append(try Self.compile(json, reference: loads[index], path: c.codingPath + [CodingKeys.load, IndexKey(index)]))
        }
        try validate(loaded, path: c.codingPath)
        handlerNames = Set(loaded.flatMap(\.handlers))
    }

    static func problem(_ path: [any CodingKey], _ message: String) -> DecodingError {
        DecodingError.dataCorrupted(.init(codingPath: path, debugDescription: message))
    }

    /// Any handler name is accepted: the scenario's `handlers:` section models the ones
    /// that are not built in.
    static func compile(_ json: String, reference: String, path: [any CodingKey]) throws -> SequenceDefinition {
        do {
            return try CompiledSequence(json: json, handlers: nil).definition
        } catch {
            let detail: String
            if case .invalidSequence(let problems) = error { detail = problems.problems.map(\.description).joined(separator: "; ") } else { detail = "\(error)" }
            throw problem(path, "\(reference) is not a valid sequence: \(detail)")
        }
    }

    /// Every sub-sequence must be among the loaded sequences, and every answered step a
    /// waiting step of the sequence whose choices include the answers.
    func validate(_ loaded: [SequenceDefinition], path: [any CodingKey]) throws {
        let names = Set(loaded.map(\.name))
        var waits: [String: WaitForInput] = [:]
        for sequence in loaded {
            var missing: String?
            Block.visit(sequence.blocks) { block in
                if case .subSequence(let sub) = block, !names.contains(sub.sequenceName), missing == nil { missing = sub.sequenceName }
                if sequence.name == sequenceName, case .step(let s) = block, let w = s.waitForInput { waits[s.id] = w }
            }
            if let missing {
                throw Self.problem(path + [CodingKeys.load], "\(sequence.name) runs sub-sequence '\(missing)', which is not loaded; list it under load:")
            }
        }
        for (step, model) in answers.sorted(by: { $0.key < $1.key }) {
            guard let wait = waits[step] else {
                throw Self.problem(path + [CodingKeys.answers],
                                   "\(sequenceName) has no waiting step '\(step)'; its waiting steps: \(waits.keys.sorted().joined(separator: ", "))")
            }
            let allowed = Set(wait.effectiveChoices.map(\.value))
            if let bad = model.choices.first(where: { !allowed.contains($0.value) }) {
                throw Self.problem(path + [CodingKeys.answers], "'\(bad.value)' is not a choice of \(step); its choices: "
                    + wait.effectiveChoices.map(\.value).joined(separator: ", "))
            }
        }
    }

    /// `name` is a sequence under `<scenario dir>/workflows/`, or a path to a JSON file.
    static func read(_ name: String, directory: String, path: [any CodingKey]) throws -> String {
        let candidates = name.hasSuffix(".json")
            ? [name.hasPrefix("/") ? name : (directory as NSString).appendingPathComponent(name)]
            : [(directory as NSString).appendingPathComponent("workflows/\(name).json"),
               (directory as NSString).appendingPathComponent("workflows/examples/\(name).json")]
        for candidate in candidates {
            if let data = FileManager.default.contents(atPath: candidate), let text = String(data: data, encoding: .utf8) { return text }
        }
        throw problem(path, "no sequence '\(name)' (looked for \(candidates.joined(separator: ", ")))")
    }
}

extension AnswerModel: Decodable {
    enum CodingKeys: String, CodingKey, CaseIterable { case choices, thinkTime, neverAnswer }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let pairs = try c.decodeIfPresent([String: Ratio].self, forKey: .choices) ?? [:]
        choices = pairs.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
        let total = choices.reduce(UInt64(0)) { $0 + UInt64($1.ratio.numerator) * UInt64(Ratio.partsPerBillion) / UInt64($1.ratio.denominator) }
        if !choices.isEmpty && total != UInt64(Ratio.partsPerBillion) {
            throw DecodingError.dataCorrupted(.init(codingPath: c.codingPath + [CodingKeys.choices],
                                                    debugDescription: "choice probabilities add up to " + (total > UInt64(Ratio.partsPerBillion) ? "more than 100%" : "\(Ratio(numerator: UInt32(total), denominator: Ratio.partsPerBillion)), not 100%")))
        }
        thinkTime = try c.decodeIfPresent(Distribution.self, forKey: .thinkTime) ?? AnswerModel.default.thinkTime
        neverAnswer = try c.decodeIfPresent(Ratio.self, forKey: .neverAnswer) ?? .zero
    }
}

extension HandlerModel: Decodable {
    enum CodingKeys: String, CodingKey, CaseIterable { case duration, failureRate }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        duration = try c.decodeIfPresent(Distribution.self, forKey: .duration) ?? HandlerModel.default.duration
        failureRate = try c.decodeIfPresent(Ratio.self, forKey: .failureRate) ?? .zero
    }
}
