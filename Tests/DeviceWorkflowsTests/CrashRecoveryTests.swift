import Foundation
import Testing
import LabKernel
import LabTestSupport
@testable import DeviceWorkflows
@testable import WorkflowHost
@testable import Orch8Wire

/// Kill the app between any two effects, relaunch, and check that no completed step is
/// lost and no step's handler runs twice.
@Suite("Crash at every effect boundary")
struct CrashRecoveryTests {
    struct Outcome: Equatable {
        var state: InstanceState
        var data: [String: JSONValue]
        var banners: [JSONValue]
    }

    static let cases: [(String, [String: JSONValue])] = [
        ("onboarding-flow", ["show_terms": "accepted", "collect_preferences": "yes", "setup_notifications": "yes", "admin_approval": "approved"]),
        ("onboarding-flow", ["show_terms": "accepted", "collect_preferences": "no", "setup_notifications": "yes", "admin_approval": "rejected"]),
        ("onboarding-flow", ["show_terms": "declined"]),
        ("payment-verification", ["payment_approval": "approved"]),
        ("payment-verification", ["payment_approval": "declined"]),
        ("feature-access", ["consent_request": "granted", "access_approval": "granted"]),
        ("feature-access", ["consent_request": "denied"]),
    ]

    /// One run that may die after `crashAfter` effects and is then relaunched over the
    /// same store. Returns the outcome, the handler runs per invocation over both
    /// processes, the completion callbacks seen, and how many effects the first run did.
    static func run<S: WorkflowStore>(_ workflow: String, answers: [String: JSONValue], store: S, crashAfter: Int?)
        throws -> (Outcome, [InvocationKey: Int], Int, Int) {
        let cfg = config()
        var host = EngineHost(engine: MobileEngine(config: cfg, handlers: BuiltinHandlers.names, seed: StreamSeed(7)), store: store)
        host.answers = answers.mapValues { [$0] }
        host.crashAfterEffects = crashAfter
        var runs: [InvocationKey: Int] = [:]
        var completions = 0
        do {
            _ = try host.loadSequence(json: workflowJSON(workflow))
            _ = try host.start(workflow, dedupKey: "launch")
            try host.runUntilIdle()
        } catch is EngineHost<S>.Crash {
            for (key, count) in host.handlerRuns { runs[key, default: 0] += count }
            completions += host.completed.count
            // Same engine seed: when the kill came before the instance was stored, the
            // relaunch starts it again, and the same id keeps handler outputs comparable.
            var relaunched = try EngineHost.relaunch(config: cfg, store: host.store, seed: StreamSeed(7), now: host.now)
            relaunched.answers = answers.mapValues { [$0] }
            if relaunched.engine.loadedSequences().isEmpty { _ = try relaunched.loadSequence(json: workflowJSON(workflow)) }
            if relaunched.engine.allInstances.isEmpty { _ = try relaunched.start(workflow, dedupKey: "launch") }
            relaunched.answerWaitingSteps()
            try relaunched.runUntilIdle()
            host = relaunched
        }
        for (key, count) in host.handlerRuns { runs[key, default: 0] += count }
        completions += host.completed.count
        let instance = try #require(host.engine.allInstances.first)
        return (Outcome(state: instance.state, data: instance.data.dictionary, banners: host.banners), runs, completions, host.effectsApplied)
    }

    func check(_ kind: StoreKind) throws {
        let dir = TestPaths.scratchDirectory("crash")
        var crashPoints = 0
        for (workflow, answers) in Self.cases {
            let (reference, referenceRuns, _, boundaries) = try Self.run(workflow, answers: answers, store: InMemoryWorkflowStore(), crashAfter: nil)
            #expect(reference.state == .completed)
            for k in 0..<boundaries {
                let store = try kind.make(dir)
                let (outcome, runs, completions, _) = try Self.run(workflow, answers: answers, store: AnyStore(store), crashAfter: k)
                let label = "\(workflow) \(answers) killed after \(k) of \(boundaries) effects"
                #expect(outcome.state == reference.state, "\(label)")
                #expect(outcome.data == reference.data, "\(label)")
                #expect(runs.values.allSatisfy { $0 == 1 }, "a handler ran twice: \(label)")
                #expect(runs.count == referenceRuns.count, "\(label): \(runs.count) handlers ran, \(referenceRuns.count) expected")
                #expect(completions <= 1, "\(label): completed \(completions) times")
                crashPoints += 1
            }
        }
        #expect(crashPoints > 200, "only \(crashPoints) crash points were tried")
    }

    @Test("SQLite store: every kill point of the three seed workflows recovers exactly")
    func sqlite() throws { try check(.sqlite) }

    @Test("In-memory store: every kill point recovers exactly")
    func memory() throws { try check(.memory) }
}
