public import LabKernel
public import Orch8Wire

/// The device's side of orch8 sync as a sans-I/O core: when to sync, what a request
/// carries, and what its answer settles (the seed's Adaptive Sync Timing and Outbox
/// Pattern).
///
/// Theory of operation. The client is `idle` until a sync is due: at the first tick at or
/// after `dueTick` (the server's `sync_interval_secs`, clamped to 5…3600 s and counted in
/// base ticks, so it stretches with the power multiplier: at LowBattery a "30 s" interval
/// takes 60 s), on the tick after a push, or on the first tick once a backoff ended. Then
/// it asks the driver to read the outbox (`readOutbox`) and, given what was read
/// (`outboxRead`), sends one request (`send`) and waits for its answer (`awaiting`). A 2xx
/// answer settles the batch (`settle`: remove what it carried, mark its acks done, run its
/// commands) and schedules the next sync one interval later; anything else backs off
/// exponentially with jitter (1 s doubling to 5 min, times 0.5…1.5 from the device's
/// stream), never sooner than a `Retry-After`. One request is in flight at a time; an
/// answer that finds nothing awaiting it (the app died since) changes nothing.
///
/// Time and randomness come in: `now` with each input, the jitter from the seeded
/// stream the client is made with. The store and the engine are the driver's
/// (`SyncDriver.sync(_:)` carries the effects out against them); the transport too: a
/// driver turns `send` into an HTTP request, a message on the simulator's network or a
/// direct call of a server core, and its outcome into `answered`.
public struct SyncClient: Sendable {
    public struct Config: Sendable, Equatable {
        public var deviceID: String
        public var minIntervalSecs = 5
        public var maxIntervalSecs = 3_600
        /// Per-request limits of the SDK.
        public var limits = OutboxLimits()
        public var backoffBase: TimeSpan = .seconds(1)
        public var backoffMax: TimeSpan = .minutes(5)

        public init(deviceID: String) { self.deviceID = deviceID }
    }

    public enum Input: Equatable, Sendable {
        /// The engine ticked; the tick's number (fast-forwarding advances it in bulk).
        case ticked(UInt64)
        /// A silent push arrived (`onPushReceived()`): sync on the next tick.
        case pushReceived
        /// The app asks for a sync now (a manual refresh, `syncNow`): it starts at once,
        /// backoff or not, unless one is already under way.
        case syncRequested
        /// What the driver read after `readOutbox`.
        case outboxRead(OutboxBatch)
        /// The answer to the request in flight, and the tick it arrived at.
        case answered(SyncAnswer, tick: UInt64)
        /// The app process started again: whatever was in flight died with the last one,
        /// and the first tick syncs.
        case relaunched
    }

    public enum Effect: Equatable, Sendable {
        /// Read the oldest outbox entries and pending acks up to these limits, and answer
        /// with `outboxRead`.
        case readOutbox(OutboxLimits)
        /// Send this request.
        case send(SyncRequest)
        /// The request went through: remove the entries it carried, mark its acks done,
        /// then run the server's commands, in order.
        case settle(SentBatch, commands: [SyncCommand])
        /// The request failed; nothing is lost, the next try is at `until`.
        case backOff(until: Instant)
    }

    private enum State: Equatable, Sendable {
        /// Waiting for a sync to fall due.
        case idle
        /// Due: the outbox is being read.
        case readingOutbox
        /// A request is out; this is what it carried.
        case awaiting(SentBatch)
        /// A request failed; the next may start at `until`.
        case backingOff(until: Instant)
    }

    public let config: Config
    private var state = State.idle
    /// The interval the server last asked for, clamped.
    public private(set) var intervalSecs = 30
    /// The tick at or after which the next sync is due (0: at once).
    public private(set) var dueTick: UInt64 = 0
    public private(set) var forced = false
    /// Failures in a row.
    public private(set) var failures = 0
    /// The base tick interval, in which the server's interval is counted.
    let baseTickMs: UInt64
    var generator: SeededGenerator

    public init(config: Config, baseTickMs: UInt64, seed: StreamSeed) {
        self.config = config
        self.baseTickMs = max(1, baseTickMs)
        self.generator = seed.generator()
    }

    // MARK: Queries

    /// Whether the tick numbered `tick`, at `now`, starts a sync.
    public func isDue(tick: UInt64, now: Instant) -> Bool {
        switch state {
        case .readingOutbox, .awaiting: return false
        case .backingOff(let until): return now >= until
        case .idle: return forced || tick >= dueTick
        }
    }

    /// When a backoff ends (the only deadline in time rather than ticks).
    public var nextDeadline: Instant? {
        if case .backingOff(let until) = state { return until }
        return nil
    }

    /// What the request in flight carried.
    public var inFlight: SentBatch? {
        if case .awaiting(let sent) = state { return sent }
        return nil
    }

    // MARK: Inputs

    public mutating func handle(_ input: Input, now: Instant) -> [Effect] {
        switch input {
        case .ticked(let tick):
            guard isDue(tick: tick, now: now) else { return [] }
            state = .readingOutbox
            forced = false
            return [.readOutbox(config.limits)]
        case .pushReceived:
            forced = true
            return []
        case .syncRequested:
            switch state {
            case .readingOutbox, .awaiting: return []
            case .idle, .backingOff:
                state = .readingOutbox
                forced = false
                return [.readOutbox(config.limits)]
            }
        case .outboxRead(let batch):
            guard state == .readingOutbox else { return [] }
            state = .awaiting(batch.sent)
            return [.send(batch.request(deviceID: config.deviceID))]
        case .answered(let answer, let tick):
            guard case .awaiting(let sent) = state else { return [] }
            return answered(answer, sent: sent, tick: tick, now: now)
        case .relaunched:
            state = .idle
            dueTick = 0
            return []
        }
    }

    private mutating func answered(_ answer: SyncAnswer, sent: SentBatch, tick: UInt64, now: Instant) -> [Effect] {
        switch answer {
        case .accepted(let response):
            intervalSecs = min(config.maxIntervalSecs, max(config.minIntervalSecs, response.syncIntervalSecs))
            failures = 0
            state = .idle
            dueTick = tick + (UInt64(intervalSecs) * 1_000 + baseTickMs - 1) / baseTickMs
            return [.settle(sent, commands: response.commands)]
        case .refused(_, let retryAfter):
            return [.backOff(until: backOff(now: now, retryAfter: retryAfter))]
        case .unreachable:
            return [.backOff(until: backOff(now: now, retryAfter: nil))]
        }
    }

    private mutating func backOff(now: Instant, retryAfter: TimeSpan?) -> Instant {
        failures += 1
        let exponent = min(failures - 1, 20)
        let raw = min(config.backoffMax.nanoseconds, config.backoffBase.nanoseconds << Int64(exponent))
        var delay = Int64(Double(raw) * (0.5 + generator.nextUnit()))
        if let retryAfter { delay = max(delay, retryAfter.nanoseconds) }
        let until = now + TimeSpan(nanoseconds: delay)
        state = .backingOff(until: until)
        return until
    }
}

/// The SDK's per-request limits.
public struct OutboxLimits: Equatable, Sendable {
    public var statuses = 100
    public var approvals = 50
    public var delegations = 20
    public var acks = 100

    public init() {}
}

/// What the driver read for one request.
public struct OutboxBatch: Equatable, Sendable {
    public var entries: [OutboxEntry]
    public var acks: [String]

    public init(entries: [OutboxEntry], acks: [String]) {
        self.entries = entries
        self.acks = acks
    }

    var sent: SentBatch { SentBatch(entries: entries, acks: acks) }

    /// The request: statuses, approvals and delegations in outbox order, then the acks.
    func request(deviceID: String) -> SyncRequest {
        var request = SyncRequest(deviceID: deviceID, commandAcks: acks)
        for entry in entries {
            switch entry.payload {
            case .status(let status): request.statusUpdates.append(status)
            case .approval(let approval): request.approvalRequests.append(approval)
            case .delegation(let delegation): request.stepDelegations.append(delegation)
            }
        }
        return request
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

/// How a sync request came back, whatever carried it.
public enum SyncAnswer: Equatable, Sendable {
    /// 2xx with a readable body.
    case accepted(SyncResponse)
    /// An answer that is not a success (429, 5xx, 4xx, or a 2xx body that does not read),
    /// with the `Retry-After` it gave.
    case refused(status: Int, retryAfter: TimeSpan?)
    /// No answer: no network, no server, no reply in time.
    case unreachable

    /// An HTTP answer: the one place a status, `Retry-After` (seconds) and body become a
    /// sync outcome.
    public init(status: Int, retryAfter: String?, body: [UInt8]) {
        if (200..<300).contains(status), let json = try? JSONValue.parse(bytes: body), let response = try? SyncResponse(json: json) {
            self = .accepted(response)
        } else {
            self = .refused(status: status, retryAfter: retryAfter.flatMap { Int64($0.trimmingWhitespace()) }.map { TimeSpan.seconds($0) })
        }
    }
}
