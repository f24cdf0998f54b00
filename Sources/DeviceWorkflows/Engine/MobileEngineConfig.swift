public import LabKernel
import Orch8Wire

/// The engine's limits and settings: the fields of the orch8 `MobileEngineConfig`.
public struct MobileEngineConfig: Sendable, Equatable {
    /// Engine heartbeat before the power multiplier.
    public var tickIntervalMs: UInt64 = 100
    /// Handlers in flight at once, across all instances.
    public var maxConcurrentSteps: UInt32 = 4
    /// An instance fails when it dispatches more steps than this (retries count).
    public var maxStepsPerInstance: UInt32 = 1_000
    /// Active (non-terminal) instances; `start` is rejected beyond it.
    public var maxConcurrentInstances: UInt32 = 10
    /// A tick yields to the next one after this much work (see `TickBudget`).
    public var maxTickDurationMs: UInt64 = 5_000
    /// Terminal instances are deleted this long after they finish; active ones that
    /// live this long fail.
    public var maxInstanceLifetimeSecs: UInt64 = 86_400
    /// Stored sequence definitions; the oldest unused ones are evicted beyond it.
    public var maxStoredSequences: UInt32 = 50
    public var maxSequenceSizeBytes: UInt64 = 1_048_576
    /// A handler that has not answered in this long fails its attempt.
    public var handlerTimeoutMs: UInt64 = 30_000
    public var operationTimeoutMs: UInt64 = 10_000
    public var telemetryEnabled = true
    public var environment = ""
    public var rootPublicKey = ""
    public var sdkVersion = "0.7.1"
    /// New instances are rejected while the estimated memory of live instances exceeds
    /// this; 0 means unlimited.
    public var memoryBudgetBytes: UInt64 = 0
    public var sequencesUrl = ""
    /// When a step with `wait_for_input` runs its handler.
    public var inputGate: InputGate = .afterHandler

    public init() {}

    public var handlerTimeout: TimeSpan { .milliseconds(Int64(handlerTimeoutMs)) }
    public var instanceLifetime: TimeSpan { .seconds(Int64(maxInstanceLifetimeSecs)) }
}

/// The seed and the real engine disagree about when a waiting step's handler runs.
public enum InputGate: String, Sendable, Equatable, CaseIterable {
    /// The seed's order: run the handler (e.g. show the terms), then wait for input.
    case afterHandler = "after-handler"
    /// The real engine's order: wait for input first, then run the handler with it.
    case beforeHandler = "before-handler"
}
