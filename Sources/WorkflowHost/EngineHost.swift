public import LabKernel
public import DeviceWorkflows
public import Orch8Wire

/// Drives a `MobileEngine` with a store and built-in handlers, synchronously: the driver
/// of `fleetlab workflow run`, `fleetlab bench engine` and the crash tests.
///
/// Effects are applied in the order the engine emits them. Storage effects go into one
/// transaction, committed before the first listener callback (so what is about to be
/// acted on is stored). The invocations among the effects run at that commit, together,
/// the way an app runs the handlers of one tick concurrently: each first looks in the
/// journal (a result recorded before a crash is handed back without running the handler
/// again); the others run, and their results are journaled in the same transaction as
/// the snapshots that dispatched them, so a tick is one transaction. No kill point falls
/// between the handlers' runs and that commit. The journal entries a tick consumed are
/// deleted in the transaction of the next tick, with the snapshots that now hold them.
///
/// `crashAfterEffects` makes the host die after that many effects, the way an app is
/// killed: the open transaction is rolled back and the host refuses to go on. A new host
/// over the same store then restores the engine and continues.
public struct EngineHost<Store: WorkflowStore> {
    public var engine: MobileEngine
    public var store: Store
    public internal(set) var handlers: [String: BuiltinHandler]
    var handlerLookup: HandlerLookup
    public let wallClock: WallClockOrigin
    /// Answers to give when a step waits: step id → values, used in order.
    public var answers: [String: [JSONValue]] = [:]
    /// Answers given every time a step waits, once `answers` has none left for it.
    public var standingAnswers: [String: JSONValue] = [:] { didSet { lastStandingAnswer = nil } }
    /// The standing answer last looked up: the waits of one tick are mostly the same
    /// step of many instances, and comparing its name with the last one (usually the very
    /// same string) is cheaper than hashing it.
    var lastStandingAnswer: (step: String, answer: JSONValue?)?
    public private(set) var now: Instant
    /// Completed instances' outputs (their context.data), by instance id.
    public private(set) var completedOutputs: [InstanceID: ContextData] = [:]
    /// The same, as JSON by the ids' text.
    public var completed: [String: JSONValue] {
        Dictionary(uniqueKeysWithValues: completedOutputs.map { ($0.key.text, $0.value.json) })
    }
    public private(set) var failed: [String: String] = [:]
    /// Steps that waited and had no answer left, in order.
    public private(set) var unanswered: [(instanceID: String, step: String)] = []
    public internal(set) var banners: [JSONValue] = []
    /// Answers the engine refused (not a choice of the step, wrong shape), with why.
    public private(set) var refusedAnswers: [(instanceID: String, step: String, reason: String)] = []
    /// Handlers actually run (not served from the journal), by invocation key, when
    /// `recordsRuns` is on (tests); `handlerRunCount` is always kept.
    public internal(set) var handlerRuns: [InvocationKey: Int] = [:]
    public var recordsRuns = true
    public internal(set) var handlerRunCount = 0
    /// Effects and commits done so far: the points where a kill can fall.
    public private(set) var effectsApplied = 0
    public var crashAfterEffects: Int?
    /// The sync reporter, once `enableSync` is called: status, approvals and delegations
    /// then go to the outbox with the changes they report.
    public var syncClient: SyncClient?
    /// Enforces `maxTickDurationMs`: called at the start of each tick, it returns the
    /// check the engine asks between instances (true: the tick's time is used up). A live
    /// driver measures wall time; nil never yields.
    public var tickBudget: (() -> () -> Bool)?
    public private(set) var crashed = false
    var pendingResults: [(InvocationKey, HandlerOutcome)] = []
    /// Reused across ticks: a tick of ten thousand instances emits tens of thousands.
    var buffer: [EngineEffect] = []
    var pendingAnswers: [(InstanceID, String, JSONValue)] = []
    /// Invocations gathered by `apply`, run at its next commit (reused between ticks).
    var deferredInvocations: [HandlerInvocation] = []
    var inTransaction = false
    var stamps = InstantStamp()
    /// The journal's keys when this host first ran handlers: results a previous process
    /// recorded. Only these are worth looking up, since a host dispatches each key once;
    /// nil until loaded.
    var recoveredJournal: Set<InvocationKey>?

    public struct Crash: Error {}

    public init(engine: MobileEngine, store: Store, handlers: [String: BuiltinHandler] = BuiltinHandlers.all,
                wallClock: WallClockOrigin = .simulationEpoch, now: Instant = .zero) {
        self.engine = engine
        self.store = store
        self.handlers = handlers
        self.handlerLookup = HandlerLookup(handlers)
        self.wallClock = wallClock
        self.now = now
    }

    /// A host over a store that already has state: the engine is restored from it.
    public static func relaunch(config: MobileEngineConfig, store: Store, seed: StreamSeed, now: Instant,
                                handlers: [String: BuiltinHandler] = BuiltinHandlers.all,
                                wallClock: WallClockOrigin = .simulationEpoch) throws -> EngineHost {
        var engine = MobileEngine(config: config, handlers: Set(handlers.keys), seed: seed, wallClock: wallClock)
        var effects: [EngineEffect] = []
        _ = engine.restore(try store.loadState(), now: now, into: &effects)
        var host = EngineHost(engine: engine, store: store, handlers: handlers, wallClock: wallClock, now: now)
        try host.apply(effects)
        return host
    }

    // MARK: Calling the engine

    public mutating func loadSequence(json: String) throws -> SequenceInfo {
        guard case .loaded(let info) = try handle(.loadSequence(json: json)) else { preconditionFailure("a load answers with its sequence") }
        return info
    }

    public mutating func start(_ name: String, input: JSONValue = [:], dedupKey: String? = nil) throws -> String {
        guard case .started(let id) = try handle(.start(sequence: name, input: input, dedupKey: dedupKey)) else {
            preconditionFailure("a start answers with its instance")
        }
        return id
    }

    public mutating func completeStep(_ id: String, step: String, output: JSONValue) throws {
        try handle(.completeStep(instanceID: id, step: step, output: output))
    }

    public mutating func cancel(_ id: String) throws { try handle(.cancel(instanceID: id)) }

    /// One input through the engine at the host's time, its effects applied.
    @discardableResult
    public mutating func handle(_ input: MobileEngine.Input) throws -> MobileEngine.Answer {
        let now = now
        return try calling { engine, effects in try engine.handle(input, now: now, into: &effects) }
    }

    /// Makes one call of the engine with the host's effect buffer, then applies what it
    /// emitted. (A fresh buffer per call grew by reallocation and was copied on its way to
    /// `apply`: three allocations for every instance started.)
    mutating func calling<T>(_ call: (inout MobileEngine, inout [EngineEffect]) throws -> T) throws -> T {
        var effects = takeBuffer()
        let result = try call(&engine, &effects)
        try apply(&effects)
        buffer = effects
        return result
    }

    /// The effect buffer, emptied (its capacity kept), for a call to fill; put it back in
    /// `buffer` once its effects are applied.
    mutating func takeBuffer() -> [EngineEffect] {
        var effects: [EngineEffect] = []
        swap(&effects, &buffer)
        effects.removeAll(keepingCapacity: true)
        return effects
    }

    /// One tick at the current time, after handing the engine every result and answer
    /// gathered since the last one.
    public mutating func tick() throws {
        guard !crashed else { throw Crash() }
        var effects = takeBuffer()
        let results = pendingResults
        pendingResults.removeAll(keepingCapacity: true)
        for (key, outcome) in results { engine.handlerFinished(key, outcome, now: now, into: &effects) }
        // The answers' instances are looked up first, all together: the lookups do not
        // depend on each other, so their cache misses overlap.
        let answered = pendingAnswers.map { engine.indexByID[$0.0] }
        for (position, (id, step, output)) in pendingAnswers.enumerated() {
            do throws(MobileEngineError) {
                guard let index = answered[position] else { throw .notFound("instance \(id)") }
                try engine.acceptInput(at: index, stepName: step, output: output, now: now)
            } catch {
                refusedAnswers.append((id.text, step, "\(error)"))
            }
        }
        pendingAnswers.removeAll()
        engine.tick(now: now, into: &effects, shouldYield: tickBudget?() ?? { false })
        if !results.isEmpty {
            // Spent once the snapshots holding these results commit: in the same transaction.
            try beginBatch()
            try store.forgetJournal(results.map(\.0))
        }
        try apply(&effects)
        buffer = effects
    }

    /// Ticks until no instance can make progress without time passing; then jumps the
    /// clock to the engine's next timer of the given kinds while there is one before
    /// `limit`. By default only retries and handler timeouts are jumped to: a wait for
    /// input stays waiting instead of timing out a day later. Returns the number of ticks.
    @discardableResult
    public mutating func runUntilIdle(limit: TimeSpan = .hours(48), timers: TimerKinds = [.retries, .handlerTimeouts],
                                      maxTicks: Int = 1_000_000) throws -> Int {
        let end = now + limit
        var ticks = 0
        while ticks < maxTicks {
            try tick()
            ticks += 1
            if !pendingResults.isEmpty || !pendingAnswers.isEmpty { continue }
            guard let next = engine.nextDeadline(including: timers) else { break }
            if next <= now { continue }
            guard next <= end else { break }
            now = next
        }
        return ticks
    }

    public mutating func advance(to instant: Instant) { if instant > now { now = instant } }

    /// Queues answers for steps already waiting (after a relaunch no `stepPending` comes
    /// again for them); returns how many were answered.
    @discardableResult
    public mutating func answerWaitingSteps() -> Int {
        var answered = 0
        for (id, step) in engine.waitingSteps() {
            guard let answer = nextAnswer(for: step) else { continue }
            pendingAnswers.append((id, step, answer))
            answered += 1
        }
        return answered
    }

    mutating func nextAnswer(for step: String) -> JSONValue? {
        if !answers.isEmpty, var queue = answers[step], !queue.isEmpty {
            let answer = queue.removeFirst()
            answers[step] = queue
            return answer
        }
        if let last = lastStandingAnswer, last.step == step { return last.answer }
        let answer = standingAnswers[step]
        lastStandingAnswer = (step, answer)
        return answer
    }

    // MARK: Applying effects

    public mutating func apply(_ effects: [EngineEffect]) throws {
        var owned = effects
        try apply(&owned)
    }

    /// Applies `effects`, moving each out of the buffer (a snapshot reaches the store
    /// without being copied); the buffer is left holding placeholders.
    mutating func apply(_ effects: inout [EngineEffect]) throws {
        for index in effects.indices {
            // Moved out, not copied: an invocation holds four references.
            guard case .invoke = effects[index] else { continue }
            var effect = EngineEffect.invoke(.vacant)
            swap(&effect, &effects[index])
            guard case .invoke(let invocation) = consume effect else { continue }
            if delegates(invocation) { effects[index] = .invoke(invocation) } else { deferredInvocations.append(invocation) }
        }
        for index in effects.indices {
            try boundary()
            var effect = MobileEngine.moved
            swap(&effect, &effects[index])
            if effect.isStorage {
                if !inTransaction {
                    try store.begin()
                    inTransaction = true
                }
                var reported: InstanceID?
                if syncClient != nil, case .persist(let snapshot) = effect, snapshot.instance.parent == nil { reported = snapshot.instance.instanceID }
                // Its last use: the effect moves into the store (a snapshot is not copied).
                try store.apply(consume effect)
                if let reported { try queueStatus(reported) }
                continue
            }
            switch effect {
            case .persist, .delete, .storeSequence, .removeSequence, .telemetry:
                break  // moved into the store above
            case .invoke(let invocation):
                // The others were moved out above (leaving a vacant one) and run at the commit.
                if delegates(invocation) {
                    try beginBatch()
                    try queueDelegation(invocation)
                }
            case .instanceCompleted(let id, let output):
                try commitIfNeeded()
                completedOutputs[id] = output
            case .instanceFailed(let id, let error):
                try commitIfNeeded()
                failed[id.text] = error
            case .stepPending(let id, let step, _):
                if syncClient != nil {
                    try beginBatch()
                    try queueApproval(id.text, step: step)
                }
                try commitIfNeeded()
                if let answer = nextAnswer(for: step) {
                    pendingAnswers.append((id, step, answer))
                } else {
                    unanswered.append((id.text, step))
                }
            }
        }
        try commitIfNeeded()
    }

    /// Whether the server runs this step (credentials to resolve), not a handler here.
    func delegates(_ invocation: HandlerInvocation) -> Bool { syncClient != nil && SyncOutboxWriter.delegates(invocation) }

    /// A point where the app may be killed: before each effect and before each commit.
    mutating func boundary() throws {
        guard !crashed else { throw Crash() }
        if let limit = crashAfterEffects, effectsApplied >= limit {
            crash()
            throw Crash()
        }
        effectsApplied += 1
    }

    /// The commit point: the gathered handlers run and their results join the open
    /// transaction (one is opened for them if need be), then it commits.
    mutating func commitIfNeeded() throws {
        guard inTransaction || !deferredInvocations.isEmpty else { return }
        try boundary()
        try runDeferredInvocations()
        try store.commit()
        inTransaction = false
        store.takeSpareSnapshots(into: &engine.spareSnapshots)
    }

    mutating func crash() {
        deferredInvocations.removeAll()
        store.rollback()
        inTransaction = false
        crashed = true
    }
}
