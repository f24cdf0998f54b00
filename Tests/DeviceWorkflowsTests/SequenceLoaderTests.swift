import LabTestSupport
import Testing
import LabKernel
@testable import DeviceWorkflows
@testable import Orch8Wire

@Suite("Sequence loading and validation")
struct SequenceLoaderTests {
    let loader = SequenceLoader(registeredHandlers: BuiltinHandlers.names)

    func problems(_ json: String, maxSize: Int = 1_048_576) -> [SequenceProblem] {
        do {
            _ = try SequenceLoader(registeredHandlers: BuiltinHandlers.names, maxSizeBytes: maxSize).load(json)
            return []
        } catch {
            return error.problems
        }
    }

    @Test("the three seed workflows have exactly the ten steps of the seed's table", arguments: [
        ("onboarding-flow", ["init_profile", "validate_email", "show_terms", "show_decline_notice", "collect_preferences",
                             "setup_notifications", "admin_approval", "show_rejection_banner", "show_welcome_banner", "complete_onboarding"]),
        ("payment-verification", ["init_payment", "validate_amount", "fraud_check", "risk_assessment", "compliance_check",
                                  "payment_approval", "show_rejection_banner", "process_payment", "show_success_banner", "send_receipt"]),
        ("feature-access", ["check_eligibility", "fetch_feature_config", "evaluate_rules", "consent_request", "show_limited_access_banner",
                            "verify_identity", "access_approval", "show_denied_banner", "show_access_granted_banner", "activate_feature"]),
    ])
    func seedWorkflows(name: String, steps: [String]) throws {
        let sequence = try loader.load(workflowJSON(name)).sequence
        #expect(sequence.name == name && sequence.tenantID == "mobile" && sequence.namespace == "default")
        #expect(Set(sequence.stepIDs) == Set(steps))
        #expect(sequence.stepIDs.count == 10)
    }

    @Test("every example loads, covering every block type in both spellings")
    func examples() throws {
        var kinds: Set<BlockKind> = []
        for name in ["parallel-checks", "race-first-response", "loop-poll", "for-each-notify", "try-catch-refund", "sub-sequence-kyc",
                     "kyc-checks", "ab-split-banner", "cancellation-scope-cleanup", "onboarding-flow"] {
            Block.visit(try loader.load(workflowJSON(name)).sequence.blocks) { kinds.insert($0.kind) }
        }
        #expect(kinds == Set(BlockKind.allCases))
        for tag in ["a_b_split", "ab_split", "abSplit"] {
            let json = #"{"name":"s","blocks":[{"type":"\#(tag)","id":"x","variants":[{"name":"a","weight":1,"blocks":[{"type":"step","id":"y","handler":"noop"}]}]}]}"#
            #expect(throws: Never.self) { try loader.load(json) }
        }
    }

    @Test("each broken rule names the block and the rule", arguments: [
        (#"{"name":"s","blocks":[{"type":"step","id":"a","handler":"noop"},{"type":"step","id":"a","handler":"noop"}]}"#,
         "a", "duplicate block id (also at blocks[0])"),
        (#"{"name":"s","blocks":[]}"#, nil, "blocks must not be empty"),
        (#"{"name":"s","blocks":[{"type":"parallel","id":"p","branches":[[]]}]}"#, "p", "a branch must not be empty"),
        (#"{"name":"s","blocks":[{"type":"step","id":"w","handler":"noop","wait_for_input":{"prompt":"?","choices":[]}}]}"#,
         "w", "choices must not be empty"),
        (#"{"name":"s","blocks":[{"type":"step","id":"w","handler":"noop","wait_for_input":{"choices":[{"label":"A","value":"x"},{"label":"B","value":"x"}]}}]}"#,
         "w", "duplicate choice value 'x'"),
        (#"{"name":"s","blocks":[{"type":"step","id":"h","handler":"launch_rockets"}]}"#, "h", "handler 'launch_rockets' is not registered"),
        (#"{"name":"s","blocks":[{"type":"router","id":"r","routes":[{"condition":"context.data.x ==","blocks":[{"type":"step","id":"y","handler":"noop"}]}]}]}"#,
         "r", "expected a value, found end of condition at position 18"),
        (#"{"name":"s","blocks":[{"type":"teleport","id":"t"}]}"#, "t", "unknown block type 'teleport'"),
        (#"{"name":"s","blocks":[{"type":"step","id":"w","handler":"noop","wait_for_input":{"store_as":""}}]}"#, "w", "store_as must not be empty"),
        (#"{"name":"s","blocks":[{"type":"step","id":"w","handler":"noop","wait_for_input":{"store_as":"x"}}]}"#, "w", "wait_for_input needs a prompt"),
        (#"{"name":"s","blocks":[{"type":"step","id":"w","handler":"noop","wait_for_input":{"prompt":"  "}}]}"#, "w", "wait_for_input needs a prompt"),
        (#"{"name":"s","blocks":[{"type":"cancellation_scope","id":"c","blocks":[{"type":"step","id":"y","handler":"noop"}],"cleanup":[]}]}"#,
         "c", "cleanup must not be empty"),
        (#"{"name":"s","blocks":[{"type":"a_b_split","id":"ab","variants":[{"name":"a","weight":0,"blocks":[{"type":"step","id":"y","handler":"noop"}]}]}]}"#,
         "ab", "at least one variant needs a positive weight"),
        (#"{"name":"s","blocks":[{"type":"step","id":"t","handler":"noop","timeout":-5}]}"#, "t", "non-negative number of milliseconds"),
        (#"{"name":"s","blocks":[{"type":"loop","id":"l","condition":"true","max_iterations":0,"body":[{"type":"step","id":"y","handler":"noop"}]}]}"#,
         "l", "max_iterations is a whole number"),
        // Numbers at the edges are refused by name, never converted into a trap.
        (#"{"name":"s","blocks":[{"type":"step","id":"t","handler":"noop","timeout":999999999999999}]}"#, "t", "at most ten years"),
        (#"{"name":"s","blocks":[{"type":"step","id":"t","handler":"noop","timeout":1e300}]}"#, "t", "at most ten years"),
        (#"{"name":"s","blocks":[{"type":"step","id":"t","handler":"noop","wait_for_input":{"timeout":400000000000.5}}]}"#, "t", "at most ten years"),
        (#"{"name":"s","blocks":[{"type":"step","id":"w","handler":"noop","when":"x[99999999999999999999] == 1"}]}"#, "w",
         "index number 1e+20 is over 1000000"),
        (#"{"name":"s","blocks":[{"type":"step","id":"r","handler":"noop","retry":{"max_attempts":1e300}}]}"#, "r", "max_attempts is a whole number"),
        (#"{"name":"s","blocks":[{"type":"sub_sequence","id":"u","sequence_name":"x","version":1e300}]}"#, "u", "version is a whole number"),
    ])
    func rules(json: String, block: String?, rule: String) {
        let found = problems(json)
        #expect(found.contains { $0.blockID == block && $0.rule.contains(rule) }, "\(found)")
    }

    @Test("oversized sequences and broken JSON are refused")
    func sizeAndSyntax() {
        let big = #"{"name":"s","blocks":[{"type":"step","id":"a","handler":"noop","params":{"pad":""# + String(repeating: "x", count: 2_000) + #""}}]}"#
        #expect(problems(big, maxSize: 1_000).first?.rule.contains("maxSequenceSizeBytes is 1000") == true)
        #expect(problems("{\"name\": ").first?.rule.contains("not valid JSON") == true)
    }

    @Test("all problems are reported at once, not just the first")
    func manyProblems() {
        let json = #"{"name":"s","blocks":[{"type":"step","id":"a","handler":"nope"},{"type":"step","id":"a","handler":"noop","retry":{"max_attempts":0}}]}"#
        #expect(problems(json).count == 3)
    }

    @Test("durations are integer milliseconds or legacy fractional seconds")
    func durations() throws {
        let json = #"{"name":"s","blocks":[{"type":"step","id":"a","handler":"noop","timeout":1500},{"type":"step","id":"b","handler":"noop","timeout":2.5}]}"#
        let blocks = try loader.load(json).sequence.blocks
        guard case .step(let a) = blocks[0], case .step(let b) = blocks[1] else { Issue.record("not steps"); return }
        #expect(a.timeout == .milliseconds(1_500) && b.timeout == .milliseconds(2_500))
    }
}

@Suite("Expressions")
struct ExpressionTests {
    let data: [String: JSONValue] = ["terms_decision": "declined", "n": 3, "tags": ["a", "b"], "user": ["tier": "premium", "age": 40],
                                     "empty": "", "list": [1, 2]]

    @Test("evaluates comparisons, logic, membership and paths", arguments: [
        ("context.data.terms_decision == 'declined'", true),
        ("terms_decision != \"declined\"", false),
        ("context.data.n >= 3 && n < 4", true),
        ("n > 3 || user.tier == 'premium'", true),
        ("!(n == 3)", false),
        ("'a' in tags", true),
        ("'z' in tags", false),
        ("'prem' in user.tier", true),
        ("'tier' in user", true),
        ("user.age > 18", true),
        ("list[1] == 2", true),
        ("missing == null", true),
        ("missing.deeper.still == null", true),
        ("missing > 1", false),
        ("n == '3'", false),
        ("empty", false),
        ("tags", true),
        ("-1 < n", true),
        ("[1, 2] == list", true),
    ])
    func evaluation(source: String, expected: Bool) throws {
        #expect(try Expression(parsing: source).isTrue(in: data) == expected, "\(source)")
    }

    @Test("bad conditions fail at load with their position", arguments: [
        ("context.data.x = 1", "use '==' to compare", 16),
        ("(a == 1", "expected ')'", 8),
        ("a == 'open", "unterminated string", 6),
        ("", "empty condition", 1),
        ("a == 1 b", "unexpected 'b'", 8),
        ("context.config.x", "only context.data is readable in a condition", 1),
        ("a # b", "unexpected character '#'", 3),
        (String(repeating: "(", count: 10_000) + "a" + String(repeating: ")", count: 10_000), "a condition is at most 4096 bytes", 1),
        (String(repeating: "(", count: 100) + "a" + String(repeating: ")", count: 100), "nested more than 64 levels deep", 66),
        (String(repeating: "!", count: 200) + "a", "nested more than 64 levels deep", 66),
    ])
    func errors(source: String, message: String, position: Int) {
        do {
            _ = try Expression(parsing: source)
            Issue.record("accepted \(source)")
        } catch {
            #expect(error.message == message && error.position == position, "\(error)")
        }
    }
}
