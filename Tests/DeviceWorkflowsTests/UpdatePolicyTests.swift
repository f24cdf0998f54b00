import LabTestSupport
import Testing
import LabKernel
@testable import DeviceWorkflows
@testable import WorkflowHost
@testable import Orch8Wire

/// `update_sequence`'s five policies, moving instances of payment-verification v1 to a v2
/// that adds a final step.
@Suite("Update policies")
struct UpdatePolicyTests {
    /// payment-verification v2: v1 plus an `audit_log` step at the end.
    static var version2: String {
        var json = try! JSONValue.parse(workflowJSON("payment-verification")).objectValue!
        json["version"] = 2
        var blocks = json["blocks"]!.arrayValue!
        blocks.append(["type": "step", "id": "audit_log", "handler": "noop"])
        json["blocks"] = .array(blocks)
        return JSONValue.object(json).canonicalText
    }

    /// An instance of v1 waiting at payment_approval, with v2 loaded beside it.
    func waitingInstance() throws -> (EngineHost<InMemoryWorkflowStore>, String) {
        var host = try makeHost(["payment-verification"])
        let id = try host.start("payment-verification")
        try host.runUntilIdle()
        #expect(host.state(id) == .waiting)
        _ = try host.loadSequence(json: Self.version2)
        return (host, id)
    }

    func update(_ host: inout EngineHost<InMemoryWorkflowStore>, _ id: String, _ policy: UpdatePolicy,
                input: JSONValue? = nil) throws -> String? {
        var effects: [EngineEffect] = []
        let created = try host.engine.updateInstance(id, policy: policy, input: input, now: host.now, into: &effects)
        try host.apply(effects)
        return created
    }

    func runs(_ host: EngineHost<InMemoryWorkflowStore>, _ handler: String) -> Int {
        host.handlerRuns.keys.filter { key in
            host.engine.allInstances.contains { instance in
                instance.sequenceNumber == key.instance && instance.nodes.indices.contains(Int(key.node))
                    && host.engine.programOf[host.engine.indexByID[instance.instanceID]!].step(instance.nodes[Int(key.node)].kind)?.handler == handler
            }
        }.count
    }

    @Test("restart cancels the instance and starts the new version from the top with the given input")
    func restart() throws {
        var (host, id) = try waitingInstance()
        let fresh = try #require(try update(&host, id, .restart, input: ["amount": 5]))
        #expect(host.state(id) == .cancelled)
        host.answers = ["payment_approval": ["approved"]]
        try host.runUntilIdle()
        #expect(host.engine.instance(fresh)?.sequenceVersion == 2 && host.state(fresh) == .completed)
        #expect(host.data(fresh)["amount"] == 5 && host.data(fresh)["audit_log"] != nil)
        #expect(runs(host, "init_payment") == 2, "the new instance ran everything again")
    }

    @Test("skip_executed restarts on the new version without running the completed steps again, context kept")
    func skipExecuted() throws {
        var (host, id) = try waitingInstance()
        let paymentID = host.data(id)["init_payment"]?["payment_id"]
        let fresh = try #require(try update(&host, id, .skipExecuted))
        #expect(host.state(id) == .cancelled)
        host.answers = ["payment_approval": ["approved"]]
        try host.runUntilIdle()
        #expect(host.state(fresh) == .completed && host.engine.instance(fresh)?.sequenceVersion == 2)
        #expect(runs(host, "init_payment") == 1 && runs(host, "fraud_check") == 1)
        #expect(host.data(fresh)["init_payment"]?["payment_id"] == paymentID)
        #expect(host.stepStates(fresh)["init_payment"] == .completed && host.data(fresh)["audit_log"] != nil)
    }

    @Test("graceful lets the waiting step finish, starts nothing new, then moves the same instance to v2")
    func graceful() throws {
        var (host, id) = try waitingInstance()
        #expect(try update(&host, id, .graceful) == nil)
        try host.runUntilIdle()
        #expect(host.state(id) == .waiting && host.engine.instance(id)?.sequenceVersion == 1, "the current step is still waiting")
        try host.completeStep(id, step: "payment_approval", output: "approved")
        try host.runUntilIdle()
        let instance = try #require(host.engine.instance(id))
        #expect(instance.state == .completed && instance.sequenceVersion == 2)
        #expect(instance.data["payment_decision"] == "approved" && instance.data["audit_log"] != nil)
        #expect(runs(host, "init_payment") == 1 && runs(host, "request_approval") == 1)
    }

    @Test("fail and cancel end the instance; only restart applies to a finished one")
    func failAndCancel() throws {
        var (host, id) = try waitingInstance()
        _ = try update(&host, id, .fail)
        #expect(host.state(id) == .failed && host.engine.instance(id)?.error == "failed by update_sequence")
        #expect(throws: MobileEngineError.self) { try update(&host, id, .graceful) }
        #expect(try update(&host, id, .restart) != nil, "a finished instance may be restarted")
        var (second, other) = try waitingInstance()
        _ = try update(&second, other, .cancel)
        #expect(second.state(other) == .cancelled)
        #expect(throws: MobileEngineError.invalidInput("the input of an update is a JSON object, not 3")) {
            var (third, x) = try waitingInstance()
            _ = try update(&third, x, .restart, input: 3)
        }
    }

    @Test("a graceful update survives a relaunch: the pending switch is in the snapshot")
    func gracefulPersists() throws {
        var (host, id) = try waitingInstance()
        _ = try update(&host, id, .graceful)
        var relaunched = try EngineHost.relaunch(config: config(), store: host.store, seed: StreamSeed(2), now: host.now)
        #expect(relaunched.engine.instance(id)?.pendingUpdate?.version == 2)
        try relaunched.completeStep(id, step: "payment_approval", output: "approved")
        try relaunched.runUntilIdle()
        #expect(relaunched.engine.instance(id)?.sequenceVersion == 2 && relaunched.state(id) == .completed)
    }
}
