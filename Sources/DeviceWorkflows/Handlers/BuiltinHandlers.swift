public import LabKernel

/// A handler the host can run itself: pure, synchronous, deterministic.
public struct HandlerCall: Sendable {
    public var invocation: HandlerInvocation
    /// Wall time of the call, RFC 3339.
    public var timestamp: String
}

public typealias BuiltinHandler = @Sendable (HandlerCall) -> HandlerOutcome

/// The handlers `fleetlab workflow run` and simulations provide.
///
/// The 21 of the orch8 example apps return exactly the outputs of the seed's handler
/// table. A few generic ones make examples and tests expressible: `noop`, `echo`
/// (returns its params), `fail` (fails permanently with `params.message`), `flaky` (fails
/// retryably until attempt `params.succeed_on_attempt`, default 3), `counter` (returns
/// `{"count": previous + 1}` where previous is `input[params.key].count`) and `sleep`.
public enum BuiltinHandlers {
    public static let seed: [String: BuiltinHandler] = [
        "init_profile": { .success(["status": "profile_initialized", "timestamp": .string($0.timestamp)]) },
        "validate_email": { _ in .success(["valid": true, "email": "user@example.com"]) },
        "show_terms": { _ in .success(["shown": true]) },
        "collect_preferences": { _ in .success(["collected": true]) },
        "setup_notifications": { _ in .success(["configured": true]) },
        "request_approval": { _ in .success(["requested": true]) },
        "complete_onboarding": { _ in .success(["completed": true]) },
        "init_payment": { .success(["payment_id": .string("PAY-" + token($0)), "status": "initialized"]) },
        "validate_amount": { _ in .success(["valid": true, "amount": 99.99]) },
        "fraud_check": { _ in .success(["passed": true, "score": 0.15]) },
        "risk_assessment": { _ in .success(["risk_level": "low", "score": 0.2]) },
        "compliance_check": { _ in .success(["compliant": true, "checks": ["AML", "KYC"]]) },
        "process_payment": { _ in .success(["processed": true, "transaction_id": "TXN-001"]) },
        "send_receipt": { _ in .success(["receipt_sent": true]) },
        "check_eligibility": { _ in .success(["eligible": true]) },
        "fetch_feature_config": { _ in .success(["feature": "premium_analytics", "available": true]) },
        "evaluate_rules": { _ in .success(["rules_passed": true]) },
        "request_consent": { _ in .success(["consent_shown": true]) },
        "verify_identity": { _ in .success(["verified": true, "method": "biometric"]) },
        "activate_feature": { _ in .success(["activated": true, "feature": "premium_analytics"]) },
        "show_banner": { call in
            let p = call.invocation.params
            return .success(["shown": true, "title": p["title"] ?? "", "message": p["message"] ?? "", "style": p["style"] ?? "info"])
        },
    ]

    public static let generic: [String: BuiltinHandler] = [
        "noop": { _ in .success([:]) },
        "echo": { .success(.object($0.invocation.params)) },
        "fail": { .permanent($0.invocation.params["message"]?.stringValue ?? "failed on purpose") },
        "flaky": { call in
            let needed = Int16(call.invocation.params["succeed_on_attempt"]?.numberValue ?? 3)
            return call.invocation.key.attempt >= needed
                ? .success(["attempts": .number(Double(call.invocation.key.attempt))])
                : .retryable("transient failure on attempt \(call.invocation.key.attempt)")
        },
        "counter": { call in
            let key = call.invocation.params["key"]?.stringValue ?? call.invocation.blockID
            let previous = call.invocation.input[key]?["count"]?.numberValue ?? 0
            return .success(["count": .number(previous + 1)])
        },
        "sleep": { .success(["slept_ms": $0.invocation.params["ms"] ?? 0]) },
    ]

    /// Every built-in handler.
    public static let all: [String: BuiltinHandler] = seed.merging(generic) { first, _ in first }

    public static var names: Set<String> { Set(all.keys) }

    /// A deterministic 8-hex-digit token per invocation (payment ids).
    static func token(_ call: HandlerCall) -> String {
        let hash = StableHash.fnv1a64(call.invocation.key.description)
        return String(String(hash, radix: 16, uppercase: true).suffix(8))
    }
}
