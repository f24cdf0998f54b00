import Testing
import LabKernel
@testable import DeviceWorkflows
@testable import WorkflowHost
@testable import Orch8Wire

func sequence(_ blocks: String, name: String = "t") -> String { #"{"name":"\#(name)","version":1,"blocks":[\#(blocks)]}"# }

/// A host with inline sequences.
func inlineHost(_ sequences: [String], config: MobileEngineConfig = config(), answers: [String: [JSONValue]] = [:],
                handlers: [String: BuiltinHandler] = BuiltinHandlers.all) throws -> EngineHost<InMemoryWorkflowStore> {
    var host = EngineHost(engine: MobileEngine(config: config, handlers: Set(handlers.keys), seed: StreamSeed(3)),
                          store: InMemoryWorkflowStore(), handlers: handlers)
    host.answers = answers
    for json in sequences { _ = try host.loadSequence(json: json) }
    return host
}

@Suite("Block semantics")
struct BlockSemanticsTests {
    @Test("parallel runs every branch; one failure cancels the others and fails the block")
    func parallel() throws {
        let (host, id) = try runWorkflow("parallel-checks", answers: [:])
        #expect(host.state(id) == .completed)
        #expect(host.data(id)["fraud"] != nil && host.data(id)["risk"] != nil && host.data(id)["compliance"] != nil)
        var failing = try inlineHost([sequence(#"""
            {"type":"parallel","id":"p","branches":[[{"type":"step","id":"bad","handler":"fail","params":{"message":"boom"}}],
             [{"type":"step","id":"slow","handler":"noop","wait_for_input":{"prompt":"?"}}]]}
            """#)])
        let f = try failing.start("t")
        try failing.runUntilIdle()
        #expect(failing.state(f) == .failed)
        #expect(failing.engine.instance(f)?.error?.contains("boom") == true)
        #expect(failing.stepStates(f)["slow"] == .cancelled)
    }

    @Test("race first_to_succeed: a failing branch does not decide; the winner cancels the losers")
    func raceFirstToSucceed() throws {
        let (host, id) = try runWorkflow("race-first-response", answers: [:])
        #expect(host.state(id) == .completed)
        let steps = host.stepStates(id)
        #expect(steps["unreliable_verifier"] == .failed && steps["identity_verifier"] == .completed)
        #expect(steps["slow_prompt"] == .cancelled, "the loser waiting for input is cancelled")
        #expect(steps["after_race"] == .completed)
        #expect(host.engine.instance(id)?.nodes.first { $0.kind == .block(0) }?.cursor == 1, "branch 1 won")
    }

    @Test("race first_to_resolve: the first branch to finish decides, even by failing, and losers' results are ignored")
    func raceFirstToResolve() throws {
        // The slow branch's handler answers only when the test says so; the race is over by then.
        var held: [InvocationKey] = []
        var host = try inlineHost([sequence(#"""
            {"type":"race","id":"r","branches":[[{"type":"step","id":"quick_fail","handler":"fail"}],
             [{"type":"step","id":"slow","handler":"noop"}]]}
            """#)])
        let id = try host.start("t")
        var effects: [EngineEffect] = []
        host.engine.tick(now: .zero, into: &effects)
        for case .invoke(let invocation) in effects { held.append(invocation.key) }
        #expect(held.count == 2)
        var more: [EngineEffect] = []
        host.engine.handlerFinished(held[0], .permanent("boom"), now: .zero, into: &more)
        host.engine.tick(now: .zero, into: &more)
        #expect(host.engine.instance(id)?.state == .failed)
        host.engine.handlerFinished(held[1], .success(["late": true]), now: .zero, into: &more)
        #expect(host.engine.instance(id)?.data["slow"] == nil, "a cancelled loser's late result is ignored")
        #expect(host.engine.inFlightCount == 0)
    }

    @Test("loop: condition, break_on and max_iterations")
    func loop() throws {
        let (host, id) = try runWorkflow("loop-poll", answers: [:])
        #expect(host.state(id) == .completed)
        #expect(host.data(id)["tick"]?["count"] == 3, "the condition stops it after 3")
        var capped = try inlineHost([sequence(#"""
            {"type":"loop","id":"l","condition":"true","max_iterations":4,"body":[{"type":"step","id":"c","handler":"counter"}]}
            """#)])
        let c = try capped.start("t")
        try capped.runUntilIdle()
        #expect(capped.data(c)["c"]?["count"] == 4)
        var broken = try inlineHost([sequence(#"""
            {"type":"loop","id":"l","condition":"true","break_on":"c.count == 2","body":[{"type":"step","id":"c","handler":"counter"}]}
            """#)])
        let b = try broken.start("t")
        try broken.runUntilIdle()
        #expect(broken.data(b)["c"]?["count"] == 2)
    }

    @Test("a runaway loop is stopped by maxStepsPerInstance")
    func stepLimit() throws {
        var host = try inlineHost([sequence(#"""
            {"type":"loop","id":"l","condition":"true","max_iterations":100000,"body":[{"type":"step","id":"c","handler":"counter"}]}
            """#)], config: config { $0.maxStepsPerInstance = 25 })
        let id = try host.start("t")
        try host.runUntilIdle()
        #expect(host.state(id) == .failed)
        #expect(host.engine.instance(id)?.error?.contains("step limit exceeded") == true)
        #expect(host.data(id)["c"]?["count"] == 25)
    }

    @Test("for_each visits every item with item_var set, then clears it")
    func forEach() throws {
        let (host, id) = try runWorkflow("for-each-notify", answers: [:], input: ["recipients": ["ana", "bo", "cy"]])
        #expect(host.state(id) == .completed)
        #expect(host.data(id)["count_sent"]?["count"] == 3)
        #expect(host.data(id)["recipient"] == nil)
        let (bad, b) = try runWorkflow("for-each-notify", answers: [:], input: ["recipients": "ana"])
        #expect(bad.state(b) == .failed)
        #expect(bad.engine.instance(b)?.error?.contains("is not a list") == true)
    }

    @Test("try_catch: a retry chain that fails runs catch, then finally, and the instance completes")
    func tryCatchFinally() throws {
        var host = try makeHost(["try-catch-refund"])
        let id = try host.start("try-catch-refund")
        try host.runUntilIdle()
        #expect(host.state(id) == .completed)
        let steps = host.stepStates(id)
        #expect(steps["charge_card"] == .failed && steps["refund"] == .completed && steps["send_receipt"] == .completed)
        #expect(host.data(id)["charge"]?["error"]?.stringValue?.contains("after 3 of 3 attempts") == true)
        #expect(host.banners.map { $0["title"] } == ["Refunded"])
        // Backoff 1s then 2s: the third attempt ran at t+3s.
        #expect(host.now == .zero + .seconds(3))
    }

    @Test("try_catch without an error skips catch and still runs finally; a failing catch fails after finally")
    func tryCatchPaths() throws {
        var ok = try inlineHost([sequence(#"""
            {"type":"try_catch","id":"t1","try_block":[{"type":"step","id":"a","handler":"noop"}],
             "catch_block":[{"type":"step","id":"b","handler":"noop"}],"finally_block":[{"type":"step","id":"c","handler":"noop"}]}
            """#)])
        let o = try ok.start("t")
        try ok.runUntilIdle()
        #expect(ok.state(o) == .completed)
        #expect(ok.stepStates(o)["b"] == .skipped && ok.stepStates(o)["c"] == .completed)
        var bad = try inlineHost([sequence(#"""
            {"type":"try_catch","id":"t1","try_block":[{"type":"step","id":"a","handler":"fail"}],
             "catch_block":[{"type":"step","id":"b","handler":"fail","params":{"message":"catch broke"}}],
             "finally_block":[{"type":"step","id":"c","handler":"noop"}]}
            """#)])
        let f = try bad.start("t")
        try bad.runUntilIdle()
        #expect(bad.state(f) == .failed && bad.stepStates(f)["c"] == .completed)
        #expect(bad.engine.instance(f)?.error?.contains("catch broke") == true)
    }

    @Test("sub_sequence runs another sequence as a child and stores its context")
    func subSequence() throws {
        let (host, id) = try runWorkflow("sub-sequence-kyc", answers: [:], extra: ["kyc-checks"])
        #expect(host.state(id) == .completed)
        #expect(host.data(id)["kyc"]?["level"] == "full")
        #expect(host.data(id)["kyc"]?["identity"]?["verified"] == true)
        #expect(host.engine.allInstances.count == 2)
        let (missing, m) = try runWorkflow("sub-sequence-kyc", answers: [:])
        #expect(missing.state(m) == .failed)
        #expect(missing.engine.instance(m)?.error?.contains("'kyc-checks' is not loaded") == true)
    }

    @Test("a_b_split picks variants in proportion to their weights (10,000 instances within 1 point)")
    func abSplitProportions() throws {
        var host = try makeHost(["ab-split-banner"])
        for _ in 0..<10_000 { _ = try host.start("ab-split-banner") }
        try host.runUntilIdle()
        let variants = host.engine.allInstances.compactMap { $0.data["banner_test"]?["variant"]?.stringValue }
        #expect(variants.count == 10_000)
        let control = Double(variants.filter { $0 == "control" }.count) / 100
        #expect(abs(control - 70) <= 1, "control share \(control)%")
        // Deterministic per instance: a second engine with the same seed splits identically.
        var again = try makeHost(["ab-split-banner"])
        for _ in 0..<200 { _ = try again.start("ab-split-banner") }
        try again.runUntilIdle()
        #expect(again.engine.allInstances.map { $0.data["banner_test"] } == Array(host.engine.allInstances.prefix(200).map { $0.data["banner_test"] }))
    }

    @Test("cancellation_scope: an external cancel lets the scope finish, runs its cleanup, then stops")
    func cancellationScope() throws {
        var host = try makeHost(["cancellation-scope-cleanup"])
        let id = try host.start("cancellation-scope-cleanup")
        try host.runUntilIdle()
        #expect(host.state(id) == .waiting)
        try host.cancel(id)
        #expect(host.state(id) == .waiting, "the scope's wait survives the cancel")
        try host.completeStep(id, step: "commit_reservation", output: ["value": "yes"])
        try host.runUntilIdle()
        #expect(host.state(id) == .cancelled)
        let steps = host.stepStates(id)
        #expect(steps["notify_commit"] == .completed && steps["release_reservation"] == .completed && steps["after_scope"] == .pending)
        #expect(host.handlerRuns.count == 4, "reserve, commit, notify and the cleanup's release ran")
    }

    @Test("cancellation_scope: without a cancel the cleanup never runs")
    func cancellationScopeWithoutCancel() throws {
        let (host, id) = try runWorkflow("cancellation-scope-cleanup", answers: ["commit_reservation": "yes"])
        #expect(host.state(id) == .completed)
        let steps = host.stepStates(id)
        #expect(steps["after_scope"] == .completed && steps["release_reservation"] == .pending)
    }

    @Test("cancel stops an unprotected instance at once and drops its handlers' results")
    func cancel() throws {
        var host = try makeHost(["onboarding-flow"])
        let id = try host.start("onboarding-flow")
        var effects: [EngineEffect] = []
        host.engine.tick(now: .zero, into: &effects)
        try host.cancel(id)
        #expect(host.state(id) == .cancelled)
        #expect(host.engine.inFlightCount == 0)
        #expect(throws: MobileEngineError.self) { try host.cancel(id) }
    }

    @Test("a non-cancellable step finishes before the instance is cancelled")
    func nonCancellable() throws {
        var host = try inlineHost([sequence(#"""
            {"type":"step","id":"a","handler":"noop","cancellable":false,"wait_for_input":{"prompt":"?"}},
            {"type":"step","id":"b","handler":"noop"}
            """#)])
        let id = try host.start("t")
        try host.runUntilIdle()
        try host.cancel(id)
        #expect(host.state(id) == .waiting)
        try host.completeStep(id, step: "a", output: "no")
        try host.runUntilIdle()
        #expect(host.state(id) == .cancelled && host.stepStates(id)["b"] == .pending && host.data(id)["a"] == "no")
    }

    @Test("when: a false condition skips the step")
    func when() throws {
        var host = try inlineHost([sequence(#"""
            {"type":"step","id":"a","handler":"noop","when":"tier == 'gold'"},{"type":"step","id":"b","handler":"noop","when":"tier == 'free'"}
            """#)])
        let id = try host.start("t", input: ["tier": "free"])
        try host.runUntilIdle()
        #expect(host.stepStates(id)["a"] == .skipped && host.stepStates(id)["b"] == .completed)
    }
}
