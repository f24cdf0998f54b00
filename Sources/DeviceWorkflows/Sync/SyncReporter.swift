public import LabKernel
public import Orch8Wire

/// When a device syncs: the seed's Adaptive Sync Timing as a state machine.
///
/// Theory of operation. The interval comes from the server's hint (`sync_interval_secs`,
/// clamped to 5…3600 s) and is counted in engine ticks at the base tick interval, so it
/// stretches with the power multiplier: at LowBattery a "30 s" interval takes 60 s. The
/// driver reports ticks by their running count (`tick` is the device's tick number, which
/// fast-forwarding advances in bulk); a sync is due at the first tick at or after
/// `dueTick`. A push (`forceSync`) makes the next tick sync. One request is in flight at a
/// time; a failure backs off exponentially with jitter (1 s doubling to 5 min, times
/// 0.5…1.5), never sooner than a `Retry-After`, and the next tick after the backoff syncs.
public struct SyncReporter: Sendable {
    public struct Config: Sendable, Equatable {
        public var deviceID: String
        public var minIntervalSecs = 5
        public var maxIntervalSecs = 3_600
        /// Per-request limits of the SDK.
        public var statusBatch = 100
        public var approvalBatch = 50
        public var delegationBatch = 20
        public var ackBatch = 100
        public var backoffBase: TimeSpan = .seconds(1)
        public var backoffMax: TimeSpan = .minutes(5)

        public init(deviceID: String) { self.deviceID = deviceID }
    }

    enum State: Sendable, Equatable {
        case idle
        case inFlight
        case backingOff(until: Instant)
    }

    public let config: Config
    /// The interval the server last asked for, clamped.
    public private(set) var intervalSecs = 30
    /// The tick at or after which the next sync is due (0: at once).
    public private(set) var dueTick: UInt64 = 0
    public private(set) var forced = false
    /// Failures in a row.
    public private(set) var failures = 0
    var state = State.idle
    var generator: SeededGenerator

    public init(config: Config, seed: StreamSeed) {
        self.config = config
        self.generator = seed.generator()
    }

    public var isInFlight: Bool { state == .inFlight }

    /// Whether the tick numbered `tick`, at `now`, should start a sync.
    public func isDue(tick: UInt64, now: Instant) -> Bool {
        switch state {
        case .inFlight: return false
        case .backingOff(let until): return now >= until
        case .idle: return forced || tick >= dueTick
        }
    }

    /// When a sync can next be due in time rather than ticks (a backoff); nil otherwise.
    public var backoffUntil: Instant? {
        if case .backingOff(let until) = state { return until }
        return nil
    }

    /// A silent push arrived (`onPushReceived()`): sync on the next tick.
    public mutating func forceSync() { forced = true }

    public mutating func began() {
        state = .inFlight
        forced = false
    }

    /// A sync answered 2xx at `tick`: the next is due one interval (in base ticks) later.
    public mutating func succeeded(intervalHint: Int, tick: UInt64, baseTickMs: UInt64) {
        intervalSecs = min(config.maxIntervalSecs, max(config.minIntervalSecs, intervalHint))
        failures = 0
        state = .idle
        let ticks = (UInt64(intervalSecs) * 1_000 + max(1, baseTickMs) - 1) / max(1, baseTickMs)
        dueTick = tick + ticks
    }

    /// A sync failed (network, 5xx, 429): back off; returns when the next may start.
    @discardableResult
    public mutating func failed(now: Instant, retryAfter: TimeSpan? = nil) -> Instant {
        failures += 1
        let exponent = min(failures - 1, 20)
        let raw = min(config.backoffMax.nanoseconds, config.backoffBase.nanoseconds << Int64(exponent))
        var delay = Int64(Double(raw) * (0.5 + generator.nextUnit()))
        if let retryAfter { delay = max(delay, retryAfter.nanoseconds) }
        let until = now + TimeSpan(nanoseconds: delay)
        state = .backingOff(until: until)
        return until
    }

    /// The app died with a request in flight: the next launch syncs at once.
    public mutating func reset() {
        state = .idle
        dueTick = 0
    }
}

/// What one sync request carried, to settle once it is answered.
public struct SentBatch: Equatable, Sendable {
    public var entries: [OutboxEntry]
    public var acks: [String]

    public init(entries: [OutboxEntry], acks: [String]) {
        self.entries = entries
        self.acks = acks
    }

    public var isEmpty: Bool { entries.isEmpty && acks.isEmpty }
}

extension MobileEngine {
    /// The status the reporter sends for an instance (wire-notes §a StatusUpdate): state in
    /// PascalCase, the current step and its handler (nested steps included, where the
    /// SDK only finds top-level ones), the step timeline.
    public func statusUpdate(of instanceID: InstanceID, now: Instant) -> StatusUpdate? {
        guard let index = indexByID[instanceID] else { return nil }
        let instance = instances[index]
        let current = currentStep(of: index)
        var handler: String?
        if let current, let blockIndex = programOf[index].indexByID[current], let step = programOf[index].steps[Int(blockIndex)] {
            handler = step.handler
        }
        let steps = timeline(at: index).map(\.json)
        return StatusUpdate(instanceID: instance.id, sequenceName: instance.sequenceName, state: instance.state.rawValue,
                            currentStep: current, handler: handler, timestamp: wallClock.rfc3339(at: now), steps: .array(steps))
    }

    /// The approval request for a waiting step.
    public func approvalRequest(instanceID: String, step: String) -> ApprovalRequest? {
        guard let index = index(of: instanceID), let blockIndex = programOf[index].indexByID[step],
              let spec = programOf[index].steps[Int(blockIndex)], let wait = spec.wait else { return nil }
        let choices = wait.choices.map { list in JSONValue.array(list.map { ["label": .string($0.label), "value": .string($0.value)] }) }
        return ApprovalRequest(instanceID: instanceID, blockID: step, sequenceName: instances[index].sequenceName, prompt: wait.prompt,
                               choices: choices, storeAs: wait.storeAs, timeoutSeconds: wait.timeout.map { Int($0.nanoseconds / 1_000_000_000) })
    }

    /// A delegated step waits for the server's `step_result`, not for a handler's
    /// timeout: the round trip takes a sync cycle or more.
    public mutating func holdForDelegation(_ key: InvocationKey) {
        guard let index = indexByNumber[key.instance], Int(key.node) < instances[index].nodes.count else { return }
        instances[index].nodes[Int(key.node)].deadline = nil
    }
}
