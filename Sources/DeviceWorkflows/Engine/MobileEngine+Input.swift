public import LabKernel
public import Orch8Wire

/// The engine in the shape every core has (docs/architecture.md, "The core shape"): one
/// input, the time, and the effects appended to the caller's buffer, which the hot path
/// reuses from call to call. The named methods (`start`, `tick`, …) are the same calls
/// spelled out; drivers that pass inputs around as values use this one.
extension MobileEngine {
    public enum Input: Sendable {
        /// The app starts an instance (`start(sequence, input, dedupKey)`).
        case start(sequence: String, input: JSONValue, dedupKey: String?)
        /// A person (or a command) answers a waiting step.
        case completeStep(instanceID: String, step: String, output: JSONValue)
        case cancel(instanceID: String)
        /// A handler the engine invoked has an outcome.
        case handlerFinished(InvocationKey, HandlerOutcome)
        /// The tick loop fired.
        case tick
        case loadSequence(json: String)
    }

    /// What a call returns besides its effects: the id of an instance it started.
    public enum Answer: Equatable, Sendable {
        case done
        case started(instanceID: String)
        case loaded(SequenceInfo)
    }

    @discardableResult
    public mutating func handle(_ input: Input, now: Instant, into effects: inout [EngineEffect]) throws(MobileEngineError) -> Answer {
        switch input {
        case .start(let sequence, let data, let dedupKey):
            return .started(instanceID: try start(sequence, input: data, dedupKey: dedupKey, now: now, into: &effects))
        case .completeStep(let id, let step, let output):
            try completeStep(id, stepName: step, output: output, now: now, into: &effects)
        case .cancel(let id):
            try cancelInstance(id, now: now, into: &effects)
        case .handlerFinished(let key, let outcome):
            handlerFinished(key, outcome, now: now, into: &effects)
        case .tick:
            tick(now: now, into: &effects)
        case .loadSequence(let json):
            return .loaded(try loadSequence(json: json, into: &effects))
        }
        return .done
    }
}
