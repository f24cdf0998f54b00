import Orch8Wire
import LabKernel
import LabTestSupport
import Testing
@testable import MobileSyncServer

/// The texts that every approval and status of a step repeats are kept once
/// (`SyncServerState.shared`): memory, not behaviour, so what is checked is that rows
/// share one copy and still read back exactly as sent, past the table's limit too.
@Suite("Sync server: texts many rows repeat are kept once")
struct SharedTextTests {
    static let prompt = "Approve this payment of $99.99 to ACME Corporation?"

    @Test("approvals of one step from different devices hold one copy of its prompt, choices and names")
    func approvalsShareTheirStepTexts() throws {
        var h = try ServerHarness()
        let acme = try h.tenant("acme")
        for n in 1...3 {
            _ = try h.register("phone-\(n)", key: acme, push: nil)
            let gate = ApprovalRequest(instanceID: ServerHarness.uuid(n), blockID: "payment_approval_step", sequenceName: "payment-verification",
                                       prompt: Self.prompt, choices: [["label": "Approve", "value": "approved"], ["label": "Decline", "value": "declined"]],
                                       storeAs: "payment_decision_value", timeoutSeconds: 3600)
            // Each request is JSON on the wire: the server parses its own strings from it.
            _ = try h.sync(SyncRequest(deviceID: "phone-\(n)", approvalRequests: [gate]), key: acme)
        }
        let approvals = h.server.state.approvals.values.sorted { $0.deviceID < $1.deviceID }
        #expect(approvals.count == 3)
        #expect(approvals.allSatisfy { $0.prompt == Self.prompt && $0.sequenceName == "payment-verification" })
        let fields: [(String, (ApprovalRecord) -> String?)] = [
            ("prompt", \.prompt), ("choices", \.choices), ("sequence name", \.sequenceName), ("block id", \.blockID), ("store as", \.storeAs),
        ]
        for (name, field) in fields {
            let storages = Set(approvals.map { storageAddress(of: field($0)) })
            #expect(storages.count == 1, "the \(name) is held \(storages.count) times")
        }
        #expect(Set(approvals.map { ObjectIdentifier($0.step) }).count == 1, "one step record for the three approvals")
    }

    @Test("an instance's id is held once: its status row and the table's key across reports, and its approval")
    func instanceIDsAreShared() throws {
        var h = try ServerHarness()
        let acme = try h.tenant("acme")
        _ = try h.register("phone-1", key: acme, push: nil)
        let id = ServerHarness.uuid(5)
        for (second, state) in [(1, "Running"), (2, "Waiting")] {
            let status = StatusUpdate(instanceID: id, sequenceName: "s", state: state, currentStep: "gate", handler: nil,
                                      timestamp: "2026-01-01T00:00:0\(second)Z")
            let gate = ApprovalRequest(instanceID: id, blockID: "gate", sequenceName: "s", prompt: "ok?", choices: nil, storeAs: nil, timeoutSeconds: nil)
            // JSON on the wire: each request brings its own copy of the id.
            _ = try h.sync(SyncRequest(deviceID: "phone-1", statusUpdates: [status], approvalRequests: state == "Waiting" ? [gate] : []), key: acme)
        }
        let statuses = try #require(h.server.state.statuses["phone-1"])
        let key = try #require(statuses.keys.first), row = try #require(statuses.values.first)
        #expect(statuses.count == 1 && row.state == "Waiting" && row.instanceID == id)
        #expect(storageAddress(of: row.instanceID) == storageAddress(of: key), "the row and its key hold one copy")
        let approval = try #require(h.server.state.approvals.values.first)
        #expect(approval.instanceID == id && storageAddress(of: approval.instanceID) == storageAddress(of: key), "the approval holds the same copy")
    }

    @Test("past the limit of distinct steps, a step is kept as it came (its texts still shared), and the table stops growing")
    func stepsPastTheLimit() {
        var state = SyncServerState()
        let steps = (0..<(SyncServerState.sharedTextLimit + 10)).map { n in
            ApprovalStep(blockID: "gate", sequenceName: "payment-verification", prompt: "Approve payment number \(n)?", choices: nil, storeAs: nil,
                         timeoutSecs: n, metadata: nil)
        }
        let kept = steps.map { state.shared($0) }
        #expect(kept == steps)
        #expect(state.sharedSteps.count == SyncServerState.sharedTextLimit)
        #expect(state.shared(steps[0]) === kept[0], "a step already held is handed back, not a new one")
        #expect(storageAddress(of: kept.last?.sequenceName) == storageAddress(of: kept.first?.sequenceName))
    }

    @Test("past the limit of distinct texts, a text is kept as it came, and the table stops growing")
    func pastTheLimit() {
        var state = SyncServerState()
        let texts = (0..<(SyncServerState.sharedTextLimit + 50)).map { "a prompt of its own, number \($0)" }
        let kept = texts.map { state.shared($0) }
        #expect(kept == texts)
        #expect(state.sharedTexts.count == SyncServerState.sharedTextLimit)
        // Short texts are held inline by String itself and never enter the table.
        #expect(state.shared("approved") == "approved" && state.sharedTexts.count == SyncServerState.sharedTextLimit)
    }
}
