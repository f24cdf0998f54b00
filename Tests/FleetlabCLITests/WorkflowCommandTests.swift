import Foundation
import Testing
import LabTestSupport

@Suite("fleetlab workflow")
struct WorkflowCommandTests {
    func json(_ text: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
    }

    @Test("run prints the final instance with its context and step timeline")
    func runCompleted() async throws {
        let result = try await CommandRunner.fleetlabAsync(["workflow", "run", "simulations/workflows/payment-verification.json",
                                                 "--answers", #"{"payment_approval": "approved"}"#])
        #expect(result.status == 0, "\(result.stderr)")
        let output = try json(result.stdout)
        #expect(output["state"] as? String == "Completed")
        #expect(output["sequenceName"] as? String == "payment-verification")
        #expect((output["instanceId"] as? String)?.count == 36)
        let data = try #require((output["context"] as? [String: Any])?["data"] as? [String: Any])
        #expect(data["payment_decision"] as? String == "approved")
        let steps = try #require(output["steps"] as? [[String: Any]])
        #expect(steps.first?["block_id"] as? String == "init_payment")
        #expect(Set(steps[0].keys) == ["block_id", "block_type", "state", "handler", "started_at", "completed_at"])
        #expect(steps.first { $0["block_id"] as? String == "show_rejection_banner" }?["state"] as? String == "skipped")
    }

    /// Every documented path of the three seed workflows, as docs/workflows.md shows them.
    @Test("the seed workflows reach each documented outcome through --answers", arguments: [
        ("onboarding-flow", #"{"show_terms": "declined"}"#, ["show_decline_notice"], ["collect_preferences", "complete_onboarding"]),
        ("onboarding-flow", #"{"show_terms": "accepted", "collect_preferences": "yes", "setup_notifications": "yes", "admin_approval": "approved"}"#,
         ["show_welcome_banner", "complete_onboarding"], ["show_decline_notice", "show_rejection_banner"]),
        ("onboarding-flow", #"{"show_terms": "accepted", "collect_preferences": "yes", "setup_notifications": "no", "admin_approval": "rejected"}"#,
         ["show_rejection_banner"], ["show_welcome_banner", "complete_onboarding"]),
        ("payment-verification", #"{"payment_approval": "approved"}"#, ["process_payment", "show_success_banner", "send_receipt"],
         ["show_rejection_banner"]),
        ("payment-verification", #"{"payment_approval": "declined"}"#, ["show_rejection_banner"], ["process_payment", "send_receipt"]),
        ("feature-access", #"{"consent_request": "denied"}"#, ["show_limited_access_banner"], ["verify_identity", "activate_feature"]),
        ("feature-access", #"{"consent_request": "granted", "access_approval": "granted"}"#,
         ["verify_identity", "show_access_granted_banner", "activate_feature"], ["show_denied_banner"]),
        ("feature-access", #"{"consent_request": "granted", "access_approval": "denied"}"#, ["show_denied_banner"],
         ["show_access_granted_banner", "activate_feature"]),
    ])
    func seedOutcomes(sequence: String, answers: String, ran: [String], skipped: [String]) async throws {
        let result = try await CommandRunner.fleetlabAsync(["workflow", "run", "simulations/workflows/\(sequence).json", "--answers", answers])
        #expect(result.status == 0, "\(result.stderr)")
        let output = try json(result.stdout)
        #expect(output["state"] as? String == "Completed")
        let steps = try #require(output["steps"] as? [[String: Any]])
        let state = { (id: String) in steps.first { $0["block_id"] as? String == id }?["state"] as? String }
        for id in ran { #expect(state(id) == "completed", "\(id) should have run") }
        for id in skipped { #expect(state(id) == "skipped", "\(id) should have been skipped") }
    }

    @Test("an unanswered wait ends Waiting with the prompt and choices, exit 0")
    func runWaiting() async throws {
        let result = try await CommandRunner.fleetlabAsync(["workflow", "run", "simulations/workflows/onboarding-flow.json"])
        #expect(result.status == 0)
        let output = try json(result.stdout)
        #expect(output["state"] as? String == "Waiting")
        let waiting = try #require((output["waiting"] as? [[String: Any]])?.first)
        #expect(waiting["step"] as? String == "show_terms")
        #expect((waiting["choices"] as? [[String: Any]])?.compactMap { $0["value"] as? String } == ["accepted", "declined"])
        #expect(result.stderr.contains("waiting at show_terms"))
    }

    @Test("lists of answers serve a step that waits more than once; --load brings sub-sequences")
    func answersAndLoad() async throws {
        let dir = TestPaths.scratchDirectory("wf")
        let loop = dir.appendingPathComponent("ask-twice.json").path
        try #"{"name":"ask-twice","blocks":[{"type":"loop","id":"l","condition":"true","max_iterations":2,"body":[{"type":"step","id":"q","handler":"noop","wait_for_input":{"prompt":"?"}}]}]}"#
            .write(toFile: loop, atomically: true, encoding: .utf8)
        let twice = try await CommandRunner.fleetlabAsync(["workflow", "run", loop, "--answers", #"{"q": ["yes", "no"]}"#])
        #expect(twice.status == 0)
        #expect(try json(twice.stdout)["state"] as? String == "Completed")
        let sub = try await CommandRunner.fleetlabAsync(["workflow", "run", "simulations/workflows/examples/sub-sequence-kyc.json",
                                              "--load", "simulations/workflows/examples/kyc-checks.json"])
        #expect(sub.status == 0)
        #expect(try json(sub.stdout)["state"] as? String == "Completed")
    }

    @Test("a failed instance exits 3; the SQLite database keeps it")
    func failedAndDatabase() async throws {
        let dir = TestPaths.scratchDirectory("wf")
        let file = dir.appendingPathComponent("fails.json").path
        try #"{"name":"fails","blocks":[{"type":"step","id":"f","handler":"fail","params":{"message":"nope"}}]}"#
            .write(toFile: file, atomically: true, encoding: .utf8)
        let db = dir.appendingPathComponent("device.sqlite").path
        let result = try await CommandRunner.fleetlabAsync(["workflow", "run", file, "--db", db])
        #expect(result.status == 3)
        #expect((try json(result.stdout))["error"] as? String == "step 'f' failed: nope")
        #expect(FileManager.default.fileExists(atPath: db))
    }

    @Test("invalid sequences and bad JSON exit 2 with every problem listed")
    func invalid() async throws {
        let dir = TestPaths.scratchDirectory("wf")
        let file = dir.appendingPathComponent("bad.json").path
        try #"{"name":"bad","blocks":[{"type":"step","id":"a","handler":"nope"},{"type":"step","id":"a","handler":"noop"}]}"#
            .write(toFile: file, atomically: true, encoding: .utf8)
        let run = try await CommandRunner.fleetlabAsync(["workflow", "run", file])
        #expect(run.status == 2)
        #expect(run.stderr.contains("handler 'nope' is not registered") && run.stderr.contains("duplicate block id"))
        let validate = try await CommandRunner.fleetlabAsync(["workflow", "validate", file])
        #expect(validate.status == 2 && validate.stderr.contains("is not a valid sequence"))
        let answers = try await CommandRunner.fleetlabAsync(["workflow", "run", "simulations/workflows/onboarding-flow.json", "--answers", "{oops"])
        #expect(answers.status == 2 && answers.stderr.contains("--answers is not valid JSON"))
        let choice = try await CommandRunner.fleetlabAsync(["workflow", "run", "simulations/workflows/onboarding-flow.json",
                                                 "--answers", #"{"show_terms": "maybe"}"#])
        #expect(choice.status == 2)
        #expect(choice.stderr.contains("the answer for show_terms was refused: invalid input: 'maybe' is not a choice"))
        #expect(try await CommandRunner.fleetlabAsync(["workflow", "run", "nope.json"]).status == 2)
    }

    @Test("validate accepts every shipped workflow")
    func validateShipped() async throws {
        let root = TestPaths.packageRoot.appendingPathComponent("simulations/workflows")
        var files = try FileManager.default.contentsOfDirectory(atPath: root.path).filter { $0.hasSuffix(".json") }.map { "simulations/workflows/\($0)" }
        files += try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("examples").path)
            .filter { $0.hasSuffix(".json") }.map { "simulations/workflows/examples/\($0)" }
        #expect(files.count >= 12)
        for file in files {
            let result = try await CommandRunner.fleetlabAsync(["workflow", "validate", file])
            #expect(result.status == 0, "\(file): \(result.stderr)")
            #expect(result.stdout.hasPrefix("valid: "))
        }
    }
}
