import ArgumentParser
import DeviceWorkflows
import WorkflowHost
import Orch8Wire
import Foundation
import LabKernel

struct WorkflowCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "workflow",
        abstract: "Run or validate orch8 sequences with the on-device engine.",
        subcommands: [WorkflowRun.self, WorkflowValidate.self])
}

/// Options both workflow commands share.
struct SequenceFiles: ParsableArguments {
    @Argument(help: "A sequence file (orch8 JSON), e.g. simulations/workflows/onboarding-flow.json.")
    var sequence: String

    @Option(name: .customLong("load"), help: "Another sequence to load first (for sub_sequence blocks); repeatable.")
    var extra: [String] = []

    func read(_ path: String) throws -> String {
        guard let data = FileManager.default.contents(atPath: path) else { throw CLIFailure.badInput("\(path): no such file") }
        guard let text = String(data: data, encoding: .utf8) else { throw CLIFailure.badInput("\(path): not UTF-8 text") }
        return text
    }

    /// Loads the extra sequences and then the main one; validation problems are exit 2.
    func load(into host: inout EngineHost<some WorkflowStore>) throws -> SequenceInfo {
        var info: SequenceInfo?
        for path in extra + [sequence] {
            do {
                info = try host.loadSequence(json: try read(path))
            } catch let error as MobileEngineError {
                throw CLIFailure.badInput("\(path) is not a valid sequence:\n\(Self.indent(error))")
            }
        }
        return info!
    }

    static func indent(_ error: MobileEngineError) -> String {
        if case .invalidSequence(let validation) = error {
            return validation.problems.map { "  - \($0)" }.joined(separator: "\n")
        }
        return "  - \(error)"
    }
}

struct WorkflowRun: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run one instance to completion with the built-in handlers and print it as JSON.",
        discussion: """
        --answers maps a step id to the value given when it waits, or to a list of values \
        for a step that waits more than once: '{"show_terms": "accepted", "admin_approval": "approved"}'. \
        A wait with no answer left ends the run with the instance Waiting; its prompt and \
        choices are printed.

        Exit status: 0 the instance completed or is waiting, 2 bad input (an invalid \
        sequence, bad JSON), 3 the instance failed or was cancelled.
        """)

    @OptionGroup var files: SequenceFiles

    @Option(help: "The instance's input, a JSON object.")
    var input = "{}"

    @Option(help: "Answers for waiting steps, a JSON object (see above).")
    var answers = "{}"

    @Option(help: "Keep the device database in this SQLite file (default: in memory).")
    var db: String?

    @Option(help: "Seed of the engine's random stream (a_b_split choices, instance ids).")
    var seed: UInt64 = 1

    @Option(help: "When a step with wait_for_input runs its handler: after-handler (the seed's order) or before-handler (the real engine's).")
    var inputGate = InputGate.afterHandler.rawValue

    func run() throws {
        let inputJSON = try parse(input, what: "--input")
        let answerMap = try Self.answerQueues(try parse(answers, what: "--answers"))
        guard let gate = InputGate(rawValue: inputGate) else {
            throw CLIFailure.badInput("--input-gate is after-handler or before-handler, not '\(inputGate)'")
        }
        var config = MobileEngineConfig()
        config.inputGate = gate
        config.maxConcurrentInstances = 100
        // A driver may read the wall clock: timestamps in the output are real.
        let origin = WallClockOrigin(unixMilliseconds: Int64(Date().timeIntervalSince1970 * 1000))
        let engine = MobileEngine(config: config, handlers: BuiltinHandlers.names, seed: StreamSeed(seed), wallClock: origin)
        if let db {
            try OutputPaths.checkWritableFile(db)
            var host = EngineHost(engine: engine, store: try SQLiteWorkflowStore(path: db), wallClock: origin)
            try execute(&host, input: inputJSON, answers: answerMap)
        } else {
            var host = EngineHost(engine: engine, store: InMemoryWorkflowStore(), wallClock: origin)
            try execute(&host, input: inputJSON, answers: answerMap)
        }
    }

    func execute<S: WorkflowStore>(_ host: inout EngineHost<S>, input: JSONValue, answers: [String: [JSONValue]]) throws {
        host.answers = answers
        // maxTickDurationMs against real time, as on a phone.
        let budget = Duration.milliseconds(Int64(host.engine.config.maxTickDurationMs))
        host.tickBudget = {
            let start = ContinuousClock.now
            return { ContinuousClock.now - start >= budget }
        }
        let info = try files.load(into: &host)
        let id: String
        do {
            id = try host.start(info.name, input: input)
        } catch let error as MobileEngineError {
            throw CLIFailure.badInput("cannot start \(info.name): \(error)")
        }
        try host.runUntilIdle()
        guard let instance = host.engine.instance(id) else { throw CLIFailure(message: "the instance vanished", status: 1) }
        var output = WorkflowReport.json(instance, engine: host.engine)
        if !host.banners.isEmpty { output = output.merging(["banners": .array(host.banners)]) }
        let waiting = WorkflowReport.waiting(instance, engine: host.engine)
        if !waiting.isEmpty { output = output.merging(["waiting": .array(waiting)]) }
        print(output.prettyText)
        for wait in waiting {
            let choices = wait["choices"]?.arrayValue?.compactMap { $0["value"]?.stringValue } ?? []
            Console.error("waiting at \(wait["step"]?.stringValue ?? "?"): \(wait["prompt"]?.stringValue ?? "") — choices: "
                + choices.joined(separator: ", ") + "; answer with --answers '{\"\(wait["step"]?.stringValue ?? "")\": \"\(choices.first ?? "yes")\"}'")
        }
        if let refused = host.refusedAnswers.first {
            throw CLIFailure.badInput("the answer for \(refused.step) was refused: \(refused.reason)")
        }
        if instance.state == .failed || instance.state == .cancelled { throw ExitCode(ExitStatus.checksFailed) }
    }

    func parse(_ text: String, what: String) throws -> JSONValue {
        do { return try JSONValue.parse(text) } catch { throw CLIFailure.badInput("\(what) is not valid JSON: \(error)") }
    }

    /// `{"step": value}` or `{"step": [value, value]}` to answer queues.
    static func answerQueues(_ json: JSONValue) throws -> [String: [JSONValue]] {
        guard case .object(let fields) = json else { throw CLIFailure.badInput("--answers must be a JSON object of step id to answer") }
        return fields.mapValues { value in
            if case .array(let list) = value { return list }
            return [value]
        }
    }
}

struct WorkflowValidate: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "validate",
        abstract: "Validate a sequence against the engine's rules and built-in handlers.",
        discussion: "Exit status: 0 valid (warnings are printed), 2 invalid (every problem is listed).")

    @OptionGroup var files: SequenceFiles

    func run() throws {
        var host = EngineHost(engine: MobileEngine(config: MobileEngineConfig(), handlers: BuiltinHandlers.names, seed: StreamSeed(1)),
                              store: InMemoryWorkflowStore())
        let info = try files.load(into: &host)
        let text = try files.read(files.sequence)
        let loaded = try? SequenceLoader(registeredHandlers: BuiltinHandlers.names).load(text)
        let steps = loaded?.sequence.stepIDs.count ?? 0
        print("valid: \(info.name) v\(info.version), \(steps) steps, handlers: \(info.handlers.joined(separator: ", "))")
        for warning in loaded?.warnings ?? [] { print("warning: \(warning)") }
    }
}

/// The JSON `fleetlab workflow run` prints.
enum WorkflowReport {
    static func json(_ instance: WorkflowInstance, engine: MobileEngine) -> JSONValue {
        var object: [String: JSONValue] = [
            "instanceId": .string(instance.id), "sequenceName": .string(instance.sequenceName),
            "state": .string(instance.state.rawValue), "context": ["data": instance.data.json],
            "steps": .array(engine.timeline(of: instance.id).map(\.json)),
        ]
        if let error = instance.error { object["error"] = .string(error) }
        return .object(object)
    }

    static func waiting(_ instance: WorkflowInstance, engine: MobileEngine) -> [JSONValue] {
        guard let sequence = engine.sequence(named: instance.sequenceName, version: instance.sequenceVersion) else { return [] }
        var steps: [String: StepBlock] = [:]
        Block.visit(sequence.blocks) { if case .step(let s) = $0 { steps[s.id] = s } }
        return engine.waitingSteps().filter { $0.instanceID == instance.instanceID }.compactMap { entry in
            guard let wait = steps[entry.step]?.waitForInput else { return nil }
            return ["step": .string(entry.step), "prompt": .string(wait.prompt),
                    "choices": .array(wait.effectiveChoices.map { ["label": .string($0.label), "value": .string($0.value)] })]
        }
    }
}

extension JSONValue {
    func merging(_ other: [String: JSONValue]) -> JSONValue {
        guard case .object(var fields) = self else { return self }
        for (key, value) in other { fields[key] = value }
        return .object(fields)
    }
}
