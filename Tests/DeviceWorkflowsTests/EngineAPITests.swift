import LabTestSupport
import Foundation
import Testing
import LabKernel
@testable import DeviceWorkflows
import WorkflowHost
@testable import Orch8Wire

@Suite("Engine API and limits")
struct EngineAPITests {
    let waitOne = sequence(#"""
        {"type":"step","id":"ask","handler":"noop","wait_for_input":{"prompt":"Pick","choices":[{"label":"A","value":"a"},{"label":"B","value":"b"}],"store_as":"pick"}},
        {"type":"step","id":"after","handler":"noop"}
        """#)

    @Test("completeStep stores the value under store_as and merges the rest of an object output")
    func completeStep() throws {
        var host = try inlineHost([waitOne])
        let id = try host.start("t")
        try host.runUntilIdle()
        #expect(host.state(id) == .waiting)
        try host.completeStep(id, step: "ask", output: ["value": "b", "comment": "looks fine"])
        try host.runUntilIdle()
        #expect(host.state(id) == .completed)
        #expect(host.data(id)["pick"] == "b" && host.data(id)["comment"] == "looks fine")
    }

    @Test("completeStep refuses what it cannot apply, with the reason", arguments: [
        (JSONValue.object(["value": "c"]), "'c' is not a choice of step 'ask'; expected one of: a, b"),
        (JSONValue.object(["choice": "a"]), "output must be {\"value\": <choice>}"),
        (JSONValue.number(1), "output must be {\"value\": <choice>}"),
    ])
    func completeStepErrors(output: JSONValue, message: String) throws {
        var host = try inlineHost([waitOne])
        let id = try host.start("t")
        try host.runUntilIdle()
        #expect { try host.completeStep(id, step: "ask", output: output) } throws: { "\($0)".contains(message) }
        #expect(host.state(id) == .waiting, "a refused answer changes nothing")
        #expect { try host.completeStep(id, step: "after", output: "a") } throws: { "\($0)".contains("is not waiting for input; waiting: ask") }
        #expect { try host.completeStep("nope", step: "ask", output: "a") } throws: { "\($0)".contains("not found: instance nope") }
        let unknown = "00000000-0000-4000-8000-000000000000"
        #expect { try host.completeStep(unknown, step: "ask", output: "a") } throws: { "\($0)".contains("not found: instance \(unknown)") }
        // Ids are UUIDs, and a UUID is the same in either case.
        try host.completeStep(id.uppercased(), step: "ask", output: "a")
        #expect { try host.completeStep(id, step: "ask", output: "a") } throws: { "\($0)".contains("not Waiting") }
    }

    @Test("steps without choices take the default yes/no")
    func defaultChoices() throws {
        var host = try inlineHost([sequence(#"{"type":"step","id":"ok","handler":"noop","wait_for_input":{"prompt":"?"}}"#)])
        let id = try host.start("t")
        try host.runUntilIdle()
        #expect { try host.completeStep(id, step: "ok", output: "approved") } throws: { "\($0)".contains("expected one of: yes, no") }
        try host.completeStep(id, step: "ok", output: "yes")
        try host.runUntilIdle()
        #expect(host.data(id)["ok"] == "yes" && host.state(id) == .completed)
    }

    @Test("the real engine's gate order: input first, then the handler runs")
    func inputBeforeHandler() throws {
        var host = try inlineHost([waitOne], config: config { $0.inputGate = .beforeHandler })
        let id = try host.start("t")
        try host.runUntilIdle()
        #expect(host.state(id) == .waiting && host.handlerRuns.isEmpty, "no handler ran before the input")
        try host.completeStep(id, step: "ask", output: "a")
        try host.runUntilIdle()
        #expect(host.state(id) == .completed && host.handlerRuns.count == 2 && host.data(id)["pick"] == "a")
    }

    @Test("a dedup key held by an active instance returns that instance")
    func dedup() throws {
        var host = try inlineHost([waitOne])
        let first = try host.start("t", dedupKey: "push-42")
        #expect(try host.start("t", dedupKey: "push-42") == first)
        #expect(host.engine.activeInstances().count == 1)
        try host.cancel(first)
        #expect(try host.start("t", dedupKey: "push-42") != first, "a finished instance frees its key")
    }

    @Test("maxConcurrentInstances and memoryBudgetBytes reject new instances")
    func instanceLimits() throws {
        var host = try inlineHost([waitOne], config: config { $0.maxConcurrentInstances = 2 })
        _ = try host.start("t")
        _ = try host.start("t")
        #expect { _ = try host.start("t") } throws: { "\($0)".contains("resource limit: 2 instances are active") }
        var small = try inlineHost([waitOne], config: config { $0.memoryBudgetBytes = 1_000 })
        let big = try small.start("t", input: ["blob": .string(String(repeating: "x", count: 2_000))])
        #expect { _ = try small.start("t") } throws: { "\($0)".contains("memoryBudgetBytes") }
        try small.cancel(big)
        _ = try small.start("t")
        #expect(small.engine.activeInstances().count == 1, "a finished instance gives its share of the budget back")
        #expect { _ = try small.start("nope") } throws: { "\($0)".contains("sequence 'nope'; loaded: t") }
        #expect { _ = try small.start("t", input: [1, 2]) } throws: { "\($0)".contains("input of a workflow is a JSON object") }
    }

    @Test("no more than maxConcurrentSteps handlers are ever in flight")
    func concurrentSteps() throws {
        var engine = MobileEngine(config: config { $0.maxConcurrentSteps = 3 }, handlers: BuiltinHandlers.names, seed: StreamSeed(1))
        var effects: [EngineEffect] = []
        try engine.loadSequence(json: workflowJSON("parallel-checks"), into: &effects)
        for _ in 0..<5 { try engine.start("parallel-checks", now: .zero, into: &effects) }
        var maxInFlight = 0
        for round in 0..<40 {
            effects.removeAll()
            engine.tick(now: .zero + .milliseconds(Int64(round)), into: &effects)
            maxInFlight = max(maxInFlight, engine.inFlightCount)
            for case .invoke(let call) in effects {
                engine.handlerFinished(call.key, .success([:]), now: .zero, into: &effects)
            }
        }
        #expect(maxInFlight == 3)
        #expect(engine.allInstances.allSatisfy { $0.state == .completed })
    }

    @Test("a tick that has used maxTickDurationMs yields; the instances it did not reach run on the next tick")
    func tickYields() throws {
        var engine = MobileEngine(config: config { $0.maxConcurrentSteps = 100 }, handlers: BuiltinHandlers.names, seed: StreamSeed(1))
        var effects: [EngineEffect] = []
        try engine.loadSequence(json: workflowJSON("payment-verification"), into: &effects)
        for _ in 0..<10 { try engine.start("payment-verification", now: .zero, into: &effects) }
        effects.removeAll()
        // A budget that lasts for four instances.
        var asked = 0
        engine.tick(now: .zero, into: &effects) { asked += 1; return asked > 4 }
        let first = effects.compactMap { if case .invoke(let call) = $0 { call.instanceID } else { nil } }
        #expect(Set(first).count == 4, "only the instances reached dispatched")
        #expect(engine.nextDeadline == .zero, "the rest are still due")
        effects.removeAll()
        engine.tick(now: .zero + .milliseconds(100), into: &effects)
        let second = effects.compactMap { if case .invoke(let call) = $0 { call.instanceID } else { nil } }
        #expect(Set(second).count == 6 && Set(first).isDisjoint(with: second))
    }

    @Test("a handler that never answers times out; retries follow the backoff; late answers are ignored")
    func handlerTimeout() throws {
        let silent: [String: BuiltinHandler] = [:]
        var engine = MobileEngine(config: config { $0.handlerTimeoutMs = 2_000 }, handlers: ["slow"], seed: StreamSeed(1))
        var effects: [EngineEffect] = []
        try engine.loadSequence(json: sequence(#"""
            {"type":"step","id":"s","handler":"slow","retry":{"max_attempts":2,"initial_backoff":500,"max_backoff":500}}
            """#), into: &effects)
        let id = try engine.start("t", now: .zero, into: &effects)
        _ = silent
        effects.removeAll()
        engine.tick(now: .zero, into: &effects)
        let first = effects.compactMap { if case .invoke(let c) = $0 { return c.key } else { return nil } }
        #expect(first.count == 1 && engine.nextDeadline == .zero + .seconds(2))
        engine.tick(now: .zero + .seconds(2), into: &effects)
        #expect(engine.nextDeadline == .zero + .milliseconds(2_500), "retry after the 500 ms backoff")
        engine.handlerFinished(first[0], .success(["late": true]), now: .zero + .seconds(2), into: &effects)
        #expect(engine.instance(id)?.data["s"] == nil)
        effects.removeAll()
        engine.tick(now: .zero + .milliseconds(2_500), into: &effects)
        #expect(effects.contains { if case .invoke(let c) = $0 { return c.key.attempt == 2 } else { return false } })
        engine.tick(now: .zero + .milliseconds(4_500), into: &effects)
        #expect(engine.instance(id)?.state == .failed)
        #expect(engine.instance(id)?.error?.contains("after 2 of 2 attempts") == true)
    }

    @Test("the per-instance timer summaries agree with the instances' trees after every tick, for every kind of timer")
    func timerSummaries() throws {
        var host = try makeHost(["try-catch-refund", "onboarding-flow"], config: config { $0.maxConcurrentSteps = 7 })
        for i in 0..<30 { _ = try host.start(i % 3 == 0 ? "onboarding-flow" : "try-catch-refund") }
        var checked = 0
        for _ in 0..<60 {
            try host.tick()
            for kinds: TimerKinds in [.all, [.retries, .handlerTimeouts], .inputTimeouts, .retries, .lifetime] {
                #expect(host.engine.nextDeadline(including: kinds) == deadlineFromTrees(host.engine, kinds))
                checked += 1
            }
            guard let next = host.engine.nextDeadline(including: [.retries, .handlerTimeouts]) else { break }
            host.advance(to: next)
        }
        #expect(checked > 20)
        #expect(host.engine.allInstances.contains { $0.sequenceName == "try-catch-refund" && $0.state == .completed })
        #expect(host.engine.allInstances.contains { $0.state == .waiting }, "the onboarding flows wait, unanswered, with input timeouts")
    }

    /// `nextDeadline` computed the slow way, from every tree.
    func deadlineFromTrees(_ engine: MobileEngine, _ kinds: TimerKinds) -> Instant? {
        if !engine.dirtyList.isEmpty || (!engine.dispatchQueue.isEmpty && engine.inFlightCount < Int(engine.config.maxConcurrentSteps)) {
            return engine.lastNow
        }
        var times: [Instant] = []
        for instance in engine.allInstances where !instance.state.isTerminal {
            if kinds.contains(.lifetime) { times.append(instance.createdAt + engine.config.instanceLifetime) }
            for node in instance.nodes {
                if kinds.contains(.retries), let t = node.retryAt { times.append(t) }
                if let t = node.deadline, node.inFlight ? kinds.contains(.handlerTimeouts) : kinds.contains(.inputTimeouts) { times.append(t) }
            }
        }
        return times.min()
    }

    @Test("an unanswered wait with a timeout fails the step when it expires")
    func waitTimeout() throws {
        var host = try inlineHost([sequence(#"{"type":"step","id":"w","handler":"noop","wait_for_input":{"prompt":"?","timeout":60000}}"#)])
        let id = try host.start("t")
        try host.runUntilIdle()
        #expect(host.engine.nextDeadline == .zero + .seconds(60))
        try host.runUntilIdle(timers: .all)
        #expect(host.state(id) == .failed && host.engine.instance(id)?.error?.contains("no input within the wait timeout") == true)
    }

    @Test("finished instances are collected after maxInstanceLifetimeSecs; live ones that old fail")
    func lifetime() throws {
        var host = try inlineHost([waitOne, sequence(#"{"type":"step","id":"x","handler":"noop"}"#, name: "quick")],
                                  config: config { $0.maxInstanceLifetimeSecs = 3_600 })
        let waiting = try host.start("t")
        let done = try host.start("quick")
        try host.runUntilIdle()
        #expect(host.state(done) == .completed)
        host.advance(to: .zero + .seconds(3_600))
        try host.tick()
        #expect(host.state(waiting) == .failed && host.engine.instance(waiting)?.error?.contains("lifetime exceeded") == true)
        #expect(host.engine.instance(done) == nil)
        #expect(host.store.storedInstanceCount == 1)
        host.advance(to: .zero + .seconds(7_200))
        try host.tick()
        #expect(host.store.storedInstanceCount == 0)
    }

    @Test("beyond maxStoredSequences the oldest unused sequence is evicted")
    func sequenceEviction() throws {
        var host = try inlineHost([], config: config { $0.maxStoredSequences = 2 })
        _ = try host.loadSequence(json: waitOne.replacingOccurrences(of: #""name":"t""#, with: #""name":"a""#))
        _ = try host.loadSequence(json: waitOne.replacingOccurrences(of: #""name":"t""#, with: #""name":"b""#))
        _ = try host.start("a")
        _ = try host.loadSequence(json: waitOne.replacingOccurrences(of: #""name":"t""#, with: #""name":"c""#))
        #expect(host.engine.loadedSequences().map(\.name) == ["a", "c"], "b was evicted; a is in use")
        #expect(try host.store.loadState().sequences.count == 2)
    }

    @Test("the tick interval stretches with the reported power state")
    func power() {
        var engine = MobileEngine(config: config { $0.tickIntervalMs = 200 }, handlers: [], seed: StreamSeed(1))
        #expect(engine.tickInterval == .milliseconds(200))
        engine.reportPowerState(.lowBattery)
        #expect(engine.tickInterval == .milliseconds(400))
        engine.reportPowerState(.criticalBattery)
        #expect(engine.tickInterval == .milliseconds(800))
        #expect(engine.nextDeadline == nil, "an idle engine has no deadline: its ticks can be fast-forwarded")
    }

    @Test("the timeline lists every block in document order with real states and timestamps")
    func timeline() throws {
        let (host, id) = try runWorkflow("onboarding-flow", answers: ["show_terms": "declined"])
        let entries = host.engine.timeline(of: id)
        #expect(entries.map(\.blockID).prefix(4) == ["init_profile", "validate_email", "show_terms", "terms_gate"])
        #expect(entries.first { $0.blockID == "terms_gate" }?.blockType == "router")
        #expect(entries.first { $0.blockID == "show_terms" }?.handler == "show_terms")
        #expect(entries.first { $0.blockID == "init_profile" }?.startedAt == "2026-01-01T00:00:00.000Z")
        #expect(entries.first { $0.blockID == "approval_gate" }?.state == .skipped)
        #expect(host.engine.progress(of: id) == (10, 10))
        #expect(entries[0].json["block_id"] == "init_profile")
    }

    @Test("telemetry records step and state events, and is off when disabled")
    func telemetry() throws {
        let (host, _) = try runWorkflow("payment-verification", answers: ["payment_approval": "approved"])
        let events = try host.store.telemetry(limit: 1_000).map(\.event)
        #expect(events.filter { $0.kind == .stepCompleted }.count == 10 - 1, "nine steps ran (one branch skipped)")
        #expect(events.contains { $0.kind == .instanceStateChanged && $0.detail == "Completed" })
        #expect(events.contains { $0.kind == .stepCompleted && $0.blockID == "payment_approval" && $0.detail == "input approved" })
        let (quiet, _) = try runWorkflow("payment-verification", answers: ["payment_approval": "approved"],
                                         config: config { $0.telemetryEnabled = false })
        #expect(try quiet.store.telemetry(limit: 10).isEmpty)
    }

    @Test("standing answers changed between waits answer the waits after the change")
    func standingAnswersChange() throws {
        var host = try inlineHost([waitOne])
        host.standingAnswers = ["ask": "a"]
        let first = try host.start("t")
        try host.runUntilIdle()
        host.standingAnswers = ["ask": "b"]
        let second = try host.start("t")
        try host.runUntilIdle()
        host.standingAnswers = [:]
        let third = try host.start("t")
        try host.runUntilIdle()
        #expect(host.data(first)["pick"] == "a" && host.data(second)["pick"] == "b")
        #expect(host.state(third) == .waiting && host.unanswered.map(\.instanceID) == [third])
    }

    @Test("a tick's answers are applied one by one: a refused one is reported with why and the others still go in")
    func refusedAnswers() throws {
        var host = try inlineHost([waitOne], answers: ["ask": ["c", "b"]])
        let refused = try host.start("t")
        let accepted = try host.start("t")
        try host.runUntilIdle()
        #expect(host.refusedAnswers.map(\.instanceID) == [refused])
        #expect(host.refusedAnswers.first?.reason.contains("'c' is not a choice of step 'ask'") == true)
        #expect(host.state(refused) == .waiting && host.state(accepted) == .completed && host.data(accepted)["pick"] == "b")
    }

    @Test("after shutdown every call is refused")
    func shutdown() throws {
        var engine = MobileEngine(config: config(), handlers: BuiltinHandlers.names, seed: StreamSeed(1))
        var effects: [EngineEffect] = []
        engine.resume()
        #expect(engine.isTicking)
        engine.shutdown(now: .zero, into: &effects)
        #expect(!engine.isTicking)
        #expect(throws: MobileEngineError.shutdown) { try engine.start("x", now: .zero, into: &effects) }
    }
}
