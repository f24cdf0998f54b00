import Foundation
import LabKernel
import LabTestSupport
@testable import DeviceWorkflows
@testable import WorkflowHost
@testable import Orch8Wire


func config(_ edit: (inout MobileEngineConfig) -> Void = { _ in }) -> MobileEngineConfig {
    var c = MobileEngineConfig()
    c.maxConcurrentInstances = 100_000
    c.maxConcurrentSteps = 64
    edit(&c)
    return c
}

/// A host over an in-memory store with `workflows` loaded.
func makeHost(_ workflows: [String], config: MobileEngineConfig = config(), answers: [String: [JSONValue]] = [:],
              seed: UInt64 = 1) throws -> EngineHost<InMemoryWorkflowStore> {
    var host = EngineHost(engine: MobileEngine(config: config, handlers: BuiltinHandlers.names, seed: StreamSeed(seed)),
                          store: InMemoryWorkflowStore())
    host.answers = answers
    for workflow in workflows { _ = try host.loadSequence(json: workflowJSON(workflow)) }
    return host
}

/// Runs one instance of `workflow` with `answers` to the end and returns the host and its id.
func runWorkflow(_ workflow: String, answers: [String: JSONValue], input: JSONValue = [:], extra: [String] = [],
                 config: MobileEngineConfig = config()) throws -> (EngineHost<InMemoryWorkflowStore>, String) {
    var host = try makeHost([workflow] + extra, config: config, answers: answers.mapValues { [$0] })
    let id = try host.start(workflow, input: input)
    try host.runUntilIdle()
    return (host, id)
}

extension EngineHost {
    func state(_ id: String) -> InstanceState? { engine.instance(id)?.state }
    func data(_ id: String) -> [String: JSONValue] { engine.instance(id)?.data.dictionary ?? [:] }
    func stepStates(_ id: String) -> [String: NodeState] {
        Dictionary(uniqueKeysWithValues: engine.timeline(of: id).map { ($0.blockID, $0.state) })
    }
}
