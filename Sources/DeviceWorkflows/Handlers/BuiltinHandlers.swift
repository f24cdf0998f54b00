public import LabKernel
import Orch8Wire

/// A handler the host can run itself: pure, synchronous, deterministic.
public struct HandlerCall: Sendable {
    public var invocation: HandlerInvocation
    public var now: Instant
    public var wallClock: WallClockOrigin
    /// `now` already formatted by a driver that calls many handlers at one instant.
    var formattedNow: String?

    public init(invocation: HandlerInvocation, now: Instant, wallClock: WallClockOrigin, formattedNow: String? = nil) {
        self.invocation = invocation
        self.now = now
        self.wallClock = wallClock
        self.formattedNow = formattedNow
    }

    /// Wall time of the call, RFC 3339 (formatted only when a handler asks, unless the
    /// driver formatted it once for all the calls of a tick).
    public var timestamp: String { formattedNow ?? wallClock.rfc3339(at: now) }
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
        "validate_email": constant(["valid": true, "email": "user@example.com"]),
        "show_terms": constant(["shown": true]),
        "collect_preferences": constant(["collected": true]),
        "setup_notifications": constant(["configured": true]),
        "request_approval": constant(["requested": true]),
        "complete_onboarding": constant(["completed": true]),
        "init_payment": { .success(["payment_id": .string("PAY-" + token($0)), "status": "initialized"]) },
        "validate_amount": constant(["valid": true, "amount": 99.99]),
        "fraud_check": constant(["passed": true, "score": 0.15]),
        "risk_assessment": constant(["risk_level": "low", "score": 0.2]),
        "compliance_check": constant(["compliant": true, "checks": ["AML", "KYC"]]),
        "process_payment": constant(["processed": true, "transaction_id": "TXN-001"]),
        "send_receipt": constant(["receipt_sent": true]),
        "check_eligibility": constant(["eligible": true]),
        "fetch_feature_config": constant(["feature": "premium_analytics", "available": true]),
        "evaluate_rules": constant(["rules_passed": true]),
        "request_consent": constant(["consent_shown": true]),
        "verify_identity": constant(["verified": true, "method": "biometric"]),
        "activate_feature": constant(["activated": true, "feature": "premium_analytics"]),
        "show_banner": { call in
            let p = call.invocation.params
            return .success(["shown": true, "title": p["title"] ?? "", "message": p["message"] ?? "", "style": p["style"] ?? "info"])
        },
    ]

    public static let generic: [String: BuiltinHandler] = [
        "noop": constant([:]),
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

    /// A handler that always returns `output`, built once (no allocation per call).
    static func constant(_ output: JSONValue) -> BuiltinHandler {
        let outcome = HandlerOutcome.success(output)
        return { _ in outcome }
    }

    /// A deterministic 8-hex-digit token per invocation (payment ids).
    static func token(_ call: HandlerCall) -> String {
        let hash = StableHash.fnv1a64(call.invocation.key.description)
        return String(String(hash, radix: 16, uppercase: true).suffix(8))
    }
}
