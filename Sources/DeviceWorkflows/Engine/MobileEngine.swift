public import LabKernel
public import Orch8Wire

/// Kinds of engine timer.
public struct TimerKinds: OptionSet, Sendable {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    public static let retries = TimerKinds(rawValue: 1)
    public static let handlerTimeouts = TimerKinds(rawValue: 2)
    public static let inputTimeouts = TimerKinds(rawValue: 4)
    public static let lifetime = TimerKinds(rawValue: 8)
    public static let all: TimerKinds = [.retries, .handlerTimeouts, .inputTimeouts, .lifetime]
}

/// The on-device workflow engine of orch8, as a sans-I/O core.
///
/// Theory of operation. The engine holds loaded sequences and workflow instances. Every
/// call takes `now` and appends the work it needs done to an effect buffer: handler
/// invocations, snapshots to persist, telemetry, listener callbacks. It never runs a
/// handler, reads a clock or touches storage itself. A driver applies the effects, runs
/// handlers and answers with `handlerFinished`; it calls `tick` every `tickInterval`
/// while the app runs (or only at `nextDeadline` when it fast-forwards idle ticks).
///
/// An instance is an execution tree over its sequence's blocks (`ExecNode`), advanced by
/// an interpreter that re-walks the tree from the root whenever the instance is dirty:
/// finished subtrees answer at once, running ones make progress, and the walk stops at
/// the first thing that must wait (a handler in flight, a wait for input, a retry
/// backoff). Dispatches are queued and granted in creation order up to
/// `maxConcurrentSteps`.
///
/// Durability. At the end of each call the engine emits `.persist` for every instance it
/// changed, then the invocations, then listener callbacks: intent is stored before it is
/// acted on. Invocation keys are stable (instance number, node, attempt), so a driver
/// that journals handler results can hand a result back after a crash instead of running
/// the handler again (see `EngineHost`). `restore` rebuilds the engine from stored state.
///
/// Internally instances are addressed by index and number, never by their UUID string,
/// and per-instance bookkeeping lives in arrays beside them: the hot path hashes no
/// strings. Deliberately not handled here: HTTP (sequence URLs, sync), wall clocks (a
/// `WallClockOrigin` turns instants into RFC 3339), threads.
public struct MobileEngine: Sendable {
    public private(set) var config: MobileEngineConfig
    /// Registered handler names (`registerHandler` adds one later).
    public internal(set) var handlers: Set<String>
    /// The app's `setDeviceContext`, sent with telemetry and registration.
    public internal(set) var deviceContext: DeviceContext?
    let wallClock: WallClockOrigin
    var programs: [ProgramKey: Program] = [:]
    /// Load order, oldest first, for eviction.
    var programOrder: [ProgramKey] = []
    var instances: [WorkflowInstance] = []
    /// Each instance's program, beside it.
    var programOf: [Program] = []
    /// Bit 0: to re-drive on the next tick; bit 1: changed since the last flush.
    var flags: [UInt8] = []
    /// Each instance's timers as of its last flush (see `InstanceTimers`).
    var timers: [InstanceTimers] = []
    var dirtyList: [Int] = []
    var changedList: [Int] = []
    package var indexByID: [InstanceID: Int] = [:]
    var indexByNumber = NumberedSlots<Int>()
    /// Steps ready for a handler, oldest first, by instance number and node.
    var dispatchQueue: [InvocationKey] = []
    /// Keys that stayed in the queue past a grant (no handler slot was free, or the
    /// instance was paused), so a walk that finds the step ready again does not queue it
    /// twice. Usually empty: then no key is hashed at all.
    var queued: Set<InvocationKey> = []
    /// Handler invocations in flight (nodes with `inFlight` set), for `maxConcurrentSteps`.
    public internal(set) var inFlightCount = 0
    /// Listener callbacks and invocations held back until the persists are out.
    var pendingCallbacks: [EngineEffect] = []
    /// Invocations granted right after their instance's walk, and snapshots taken then
    /// (see `tick`), held for their places among the tick's effects.
    var grantedRightAway: [EngineEffect] = []
    var persistedRightAway: [(index: Int, snapshot: InstanceSnapshot)] = []
    /// Off only in tests, which compare a tick's effects with and without it.
    var grantsRightAway = true
    /// Snapshots taken right after a walk, for tests to see that the path runs.
    var snapshotsTakenRightAway = 0
    /// With `memoryBudgetBytes` set: each instance's estimated size as of its last flush,
    /// and their sum, so `start` checks the budget without walking every instance.
    var estimatedSizes: [Int] = []
    /// When the earliest terminal instance expires (`maxInstanceLifetimeSecs` after it
    /// finished), or nil with none: garbage collection looks at the instances only then.
    var nextCollection: Instant?
    var estimatedTotal = 0
    /// The interpreter every walk reuses (see `drive`).
    var walker = Interpreter(instance: MobileEngine.placeholder, program: .empty, now: .zero, inputGate: .afterHandler, timestamp: nil)
    var generator: SeededGenerator
    var nextSequenceNumber: UInt64 = 0
    /// Non-terminal instances, kept as a count so `start` does not scan them all.
    public internal(set) var activeCount = 0
    public private(set) var powerState: PowerState = .unplugged
    public private(set) var isTicking = false
    public private(set) var isShutdown = false
    var lastNow: Instant = .zero
    var stamps = InstantStamp()
    /// Snapshots the stores let go of, for the next flushes (the host brings them).
    public var spareSnapshots = SpareSnapshots()
    /// Flushes that filled a spare snapshot instead of allocating one.
    public internal(set) var reusedSnapshots = 0
    /// Telemetry recorded since the last flush (the walker records into it directly).
    var recordedTelemetry: [TelemetryEvent] = []

    public init(config: MobileEngineConfig, handlers: Set<String>, seed: StreamSeed, wallClock: WallClockOrigin = .simulationEpoch) {
        self.config = config
        self.handlers = handlers
        self.generator = seed.generator()
        self.wallClock = wallClock
    }

    // MARK: Lifecycle and power

    /// Starts the tick loop (the app came to the foreground); drivers consult `isTicking`.
    public mutating func resume() { if !isShutdown { isTicking = true } }
    /// Pauses the tick loop; handlers in flight may still finish.
    public mutating func pause() { isTicking = false }

    /// Stops the engine for good: snapshots of changed instances go out, later calls fail.
    public mutating func shutdown(now: Instant, into effects: inout [EngineEffect]) {
        isTicking = false
        isShutdown = true
        flush(now: now, into: &effects)
    }

    /// The seed's `reportPowerState`: the tick interval stretches by the multiplier.
    public mutating func reportPowerState(_ state: PowerState) { powerState = state }

    public var tickInterval: TimeSpan { .milliseconds(Int64(config.tickIntervalMs) * powerState.tickMultiplier) }

    // MARK: Sequences

    /// Loads (or replaces) a sequence from JSON, validated against the registered
    /// handlers and `maxSequenceSizeBytes`.
    @discardableResult
    public mutating func loadSequence(json: String, into effects: inout [EngineEffect]) throws(MobileEngineError) -> SequenceInfo {
        guard !isShutdown else { throw .shutdown }
        let loader = SequenceLoader(registeredHandlers: handlers, maxSizeBytes: Int(config.maxSequenceSizeBytes))
        let loaded: SequenceLoader.Loaded
        do { loaded = try loader.load(json) } catch { throw .invalidSequence(error) }
        let program = Program(sequence: loaded.sequence, json: json)
        try install(program, into: &effects)
        return SequenceInfo(name: program.sequence.name, version: program.sequence.version, handlers: program.sequence.handlers)
    }

    mutating func install(_ program: Program, into effects: inout [EngineEffect]) throws(MobileEngineError) {
        let key = program.key
        if programs[key] == nil {
            try makeRoom(for: key, into: &effects)
            programOrder.append(key)
        }
        programs[key] = program
        effects.append(.storeSequence(name: key.name, version: key.version, json: program.json))
    }

    /// Evicts the oldest sequences no live instance uses until one more fits.
    mutating func makeRoom(for key: ProgramKey, into effects: inout [EngineEffect]) throws(MobileEngineError) {
        while programOrder.count >= Int(config.maxStoredSequences) {
            let inUse = Set(instances.filter { !$0.state.isTerminal }.map { ProgramKey(name: $0.sequenceName, version: $0.sequenceVersion) })
            guard let victim = programOrder.first(where: { !inUse.contains($0) }) else {
                throw .resourceLimit("\(programOrder.count) sequences are stored (maxStoredSequences) and every one is in use")
            }
            removeProgram(victim, into: &effects)
        }
    }

    mutating func removeProgram(_ key: ProgramKey, into effects: inout [EngineEffect]) {
        programs[key] = nil
        programOrder.removeAll { $0 == key }
        effects.append(.removeSequence(name: key.name, version: key.version))
    }

    /// Removes every version of a sequence (a manifest's `removed` list).
    public mutating func unloadSequence(named name: String, into effects: inout [EngineEffect]) {
        for key in programOrder where key.name == name { removeProgram(key, into: &effects) }
    }

    public func loadedSequences() -> [SequenceInfo] {
        programOrder.compactMap { programs[$0] }.map {
            SequenceInfo(name: $0.sequence.name, version: $0.sequence.version, handlers: $0.sequence.handlers)
        }
    }

    /// The newest loaded version of `name` (or exactly `version`).
    func program(named name: String, version: Int? = nil) -> Program? {
        if let version { return programs[ProgramKey(name: name, version: version)] }
        var newest: ProgramKey?
        for key in programOrder where key.name == name && newest.map({ $0 < key }) ?? true { newest = key }
        return newest.flatMap { programs[$0] }
    }

    public func sequence(named name: String, version: Int? = nil) -> SequenceDefinition? {
        program(named: name, version: version)?.sequence
    }

    // MARK: Queries

    /// Non-terminal instances in creation order.
    public func activeInstances() -> [InstanceSummary] {
        instances.indices.filter { !instances[$0].state.isTerminal }.map(summary)
    }

    public func getInstance(_ id: String) throws(MobileEngineError) -> InstanceSummary {
        guard let index = index(of: id) else { throw .notFound("instance \(id)") }
        return summary(index)
    }

    /// The index of the instance with id `text`; nil for an unknown id or text that is
    /// not a UUID (no instance has one).
    func index(of text: String) -> Int? { InstanceID(text).flatMap { indexByID[$0] } }

    /// The full record (for drivers, the sync reporter and tests).
    public func instance(_ id: String) -> WorkflowInstance? { index(of: id).map { instances[$0] } }

    public var allInstances: [WorkflowInstance] { instances }

    /// When the engine next has work: now if anything is ready, else its earliest timer.
    /// Garbage collection of finished instances is not work: it happens on whatever tick
    /// comes after they expire.
    public var nextDeadline: Instant? { nextDeadline(including: .all) }

    /// The next deadline counting only some kinds of timer (a run driver may not want to
    /// leap a day ahead to an input timeout).
    public func nextDeadline(including kinds: TimerKinds) -> Instant? {
        if !dirtyList.isEmpty || (!dispatchQueue.isEmpty && inFlightCount < Int(config.maxConcurrentSteps)) { return lastNow }
        var earliest: Instant?
        // By index: iterating the values would copy (retain) every instance's fields.
        for index in instances.indices {
            if let t = nextTimer(index, kinds: kinds), earliest.map({ t < $0 }) ?? true { earliest = t }
        }
        return earliest
    }

    func summary(_ index: Int) -> InstanceSummary {
        let instance = instances[index]
        return InstanceSummary(
            instanceID: instance.id, sequenceName: instance.sequenceName, state: instance.state,
            currentStep: currentStep(of: index), createdAt: wallClock.rfc3339(at: instance.createdAt),
            updatedAt: wallClock.rfc3339(at: instance.updatedAt), context: instance.data.dictionary, error: instance.error)
    }

    /// The first waiting step, else the first running one, in tree order.
    func currentStep(of index: Int) -> String? {
        var running: String?
        for node in instances[index].nodes {
            guard let step = programOf[index].step(node.kind) else { continue }
            if node.state == .waiting { return step.id }
            if node.state == .running && running == nil { running = step.id }
        }
        return running
    }

    // MARK: Bookkeeping

    mutating func markDirty(_ index: Int) {
        if flags[index] & 1 == 0 {
            flags[index] |= 1
            dirtyList.append(index)
        }
    }

    mutating func markChanged(_ index: Int) {
        if flags[index] & 2 == 0 {
            flags[index] |= 2
            changedList.append(index)
        }
    }

    /// `now` as RFC 3339, formatted once per instant.
    mutating func stamp(_ now: Instant) -> String { stamps.text(at: now, wallClock) }
}

/// An instant as RFC 3339, formatted once however often a tick asks for it (telemetry and
/// handler timestamps of one tick all carry the same instant).
package struct InstantStamp: Sendable {
    private var instant: Instant = .distantFuture
    private var formatted = ""

    package init() {}

    package mutating func text(at now: Instant, _ wallClock: WallClockOrigin) -> String {
        if now != instant {
            instant = now
            formatted = wallClock.rfc3339(at: now)
        }
        return formatted
    }
}
