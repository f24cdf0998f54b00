import Testing
import LabKernel
@testable import DeviceWorkflows
import WorkflowHost
@testable import Orch8Wire

@Suite("The seed's workflows reach every documented outcome")
struct SeedWorkflowTests {
    @Test("onboarding: accepted and approved ends with the welcome banner")
    func onboardingApproved() throws {
        let (host, id) = try runWorkflow("onboarding-flow", answers: [
            "show_terms": "accepted", "collect_preferences": "yes", "setup_notifications": "yes", "admin_approval": "approved"])
        #expect(host.state(id) == .completed)
        #expect(host.data(id)["terms_decision"] == "accepted" && host.data(id)["admin_decision"] == "approved")
        #expect(host.data(id)["complete_onboarding"] == ["completed": true])
        #expect(host.banners.map { $0["title"] } == ["Welcome!"])
        let steps = host.stepStates(id)
        #expect(steps["show_decline_notice"] == .skipped && steps["show_rejection_banner"] == .skipped)
        #expect(steps["complete_onboarding"] == .completed)
        #expect(host.completed[id] != nil)
    }

    @Test("a sequence without loops bounds its tree: every path of the seed workflows stays within it; loops have no bound")
    func treeBounds() throws {
        let paths: [(String, [String: JSONValue])] = [
            ("onboarding-flow", ["show_terms": "accepted", "collect_preferences": "yes", "setup_notifications": "yes", "admin_approval": "approved"]),
            ("onboarding-flow", ["show_terms": "declined"]),
            ("onboarding-flow", ["show_terms": "accepted", "collect_preferences": "no", "setup_notifications": "no", "admin_approval": "rejected"]),
            ("try-catch-refund", [:]), ("parallel-checks", [:]), ("race-first-response", [:]), ("ab-split-banner", [:]),
        ]
        for (workflow, answers) in paths {
            let (host, id) = try runWorkflow(workflow, answers: answers)
            let program = try #require(host.engine.program(named: workflow))
            let bound = try #require(program.treeBound, "\(workflow) has no loop, so its tree is bounded")
            let nodes = try #require(host.engine.instance(id)?.nodes.count)
            #expect(host.state(id)?.isTerminal == true && nodes <= bound, "\(workflow): \(nodes) nodes, bound \(bound)")
        }
        for looping in ["loop-poll", "for-each-notify"] {
            let host = try makeHost([looping])
            #expect(host.engine.program(named: looping)?.treeBound == nil)
        }
    }

    @Test("onboarding: rejected by the administrator shows the rejection banner")
    func onboardingRejected() throws {
        let (host, id) = try runWorkflow("onboarding-flow", answers: [
            "show_terms": "accepted", "collect_preferences": "yes", "setup_notifications": "no", "admin_approval": "rejected"])
        #expect(host.state(id) == .completed)
        #expect(host.banners.map { $0["title"] } == ["Account not approved"])
        #expect(host.stepStates(id)["complete_onboarding"] == .skipped)
    }

    @Test("onboarding: declining the terms ends with the decline notice")
    func onboardingDeclined() throws {
        let (host, id) = try runWorkflow("onboarding-flow", answers: ["show_terms": "declined"])
        #expect(host.state(id) == .completed)
        #expect(host.banners.map { $0["title"] } == ["Terms declined"])
        #expect(host.stepStates(id)["admin_approval"] == .skipped)
        #expect(host.data(id)["init_profile"]?["status"] == "profile_initialized")
    }

    @Test("payment: approved processes and sends a receipt; declined shows the rejection")
    func payment() throws {
        let (approved, a) = try runWorkflow("payment-verification", answers: ["payment_approval": "approved"])
        #expect(approved.state(a) == .completed)
        #expect(approved.data(a)["send_receipt"] == ["receipt_sent": true])
        #expect(approved.data(a)["process_payment"]?["transaction_id"] == "TXN-001")
        #expect(approved.data(a)["init_payment"]?["payment_id"]?.stringValue?.hasPrefix("PAY-") == true)
        let (declined, d) = try runWorkflow("payment-verification", answers: ["payment_approval": "declined"])
        #expect(declined.state(d) == .completed)
        #expect(declined.banners.map { $0["title"] } == ["Payment declined"])
        #expect(declined.stepStates(d)["process_payment"] == .skipped)
    }

    @Test("feature access: granted, consent denied and access denied", arguments: [
        (["consent_request": JSONValue("granted"), "access_approval": "granted"], "Access granted", true),
        (["consent_request": JSONValue("denied")], "Limited mode", false),
        (["consent_request": JSONValue("granted"), "access_approval": "denied"], "Access denied", false),
    ])
    func featureAccess(answers: [String: JSONValue], banner: String, activated: Bool) throws {
        let (host, id) = try runWorkflow("feature-access", answers: answers)
        #expect(host.state(id) == .completed)
        #expect(host.banners.map { $0["title"] } == [.string(banner)])
        #expect((host.data(id)["activate_feature"] != nil) == activated)
    }

    @Test("a wait with nobody answering leaves the instance Waiting with its prompt")
    func unanswered() throws {
        let (host, id) = try runWorkflow("onboarding-flow", answers: [:])
        #expect(host.state(id) == .waiting)
        #expect(host.unanswered.map(\.step) == ["show_terms"])
        #expect(try host.engine.getInstance(id).currentStep == "show_terms")
    }
}
