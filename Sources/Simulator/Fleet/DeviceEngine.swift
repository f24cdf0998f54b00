import DeviceWorkflows
import Orch8Wire
import LabKernel

/// One device's workflow engine as the simulator holds it: the engine itself while the
/// app process lives, the store that survives it (the phone's disk), and what is in
/// flight around it (handlers running, people thinking about an answer).
///
/// Fault model: killing the app drops the engine and everything in flight with it (a
/// handler's result never arrives, an answer finds no process); the store keeps the last
/// committed state, and the next launch restores the engine from it, re-dispatching the
/// steps that were in flight. Starts that arrive while the app is not running wait for
/// its next launch, up to `maxQueuedStarts`.
///
/// A class, not a value: the fleet reaches it on every event of its device, and reading
/// a struct of this size out of the fleet's array would copy it each time.
final class DeviceEngine {
    struct PendingHandler {
        var key: InvocationKey
        var outcome: HandlerOutcome
    }

    struct PendingAnswer {
        var instanceID: String
        var step: String
        var value: String
        var promptedAt: Instant
        /// The sequence's metric slot.
        var slot: Int?
    }

    static let maxQueuedStarts = 16

    /// What lives only while the app process does: the engine and the sync client.
    /// Boxed, so a phone whose app is not running (half to nearly all of a fleet, by the
    /// hour) holds one reference instead of both values (about 950 bytes).
    final class AppProcess {
        var engine: MobileEngine
        /// The sync client (when the scenario has sync; a launch syncs at once).
        var syncClient: SyncClient?

        init(engine: consuming MobileEngine) { self.engine = engine }
    }

    /// The app process while it lives.
    var process: AppProcess?
    var store = InMemoryWorkflowStore()
    var launches: UInt64 = 0
    var nextToken: UInt32 = 0
    var handlers: [UInt32: PendingHandler] = [:]
    var answers: [UInt32: PendingAnswer] = [:]
    /// Workload indices of starts waiting for the app to run.
    var queuedStarts: [Int] = []
    /// This device's stream for start times, answers and handler behaviour.
    var generator: SeededGenerator
    let seed: StreamSeed

    // Sync (when the scenario has it).
    /// The time of the call being made (the `SyncDriver` clock).
    var clock: Instant = .zero
    let wallClock: WallClockOrigin
    /// Effects of a command for the fleet to act on.
    var emitted: [EngineEffect] = []
    var delegatedRuns = 0
    var syncing = false
    /// The request in flight, by exchange token.
    var inFlight: UInt32?
    var lastSyncStart: Instant?
    /// When each gate (`instance:block`) was handed to the operator.
    var prompts: [String: Instant] = [:]
    /// Whether the device registered a push token.
    var pushToken = false
    /// Statuses queued as placeholders, by instance, with the time each was queued at:
    /// built when the outbox is read (`outboxWillBeRead`), or before the engine goes.
    var statusesToBuild: [InstanceID: Instant] = [:]

    init(seed: StreamSeed, wallClock: WallClockOrigin = .simulationEpoch) {
        self.seed = seed
        self.generator = seed.child("workload").generator()
        self.wallClock = wallClock
    }

    /// Whether the app process (and so the engine) is alive.
    var isRunning: Bool { process != nil }

    // Reads go through these, on the stored engine in place: reading the engine out of
    // the process (even with `?.`) copies the whole value first (callgrind shows it), and
    // the fleet asks on every event of the device. An inout access does not copy.

    func peek<R>(_ body: (inout MobileEngine) -> R) -> R? {
        guard let process else { return nil }
        return body(&process.engine)
    }

    var nextDeadline: Instant? { peek { $0.nextDeadline } ?? nil }

    func instanceFacts(_ id: String) -> (sequence: String, state: InstanceState, createdAt: Instant, topLevel: Bool)? {
        peek { $0.facts(of: id) } ?? nil
    }

    func stepDurations(of id: String) -> [(step: String, waited: Bool, duration: TimeSpan)] {
        peek { $0.stepDurations(of: id) } ?? []
    }

    func firstChoice(sequence: String, step: String) -> String? {
        peek { $0.firstChoice(sequence: sequence, step: step) } ?? nil
    }

    func waitingSteps() -> [(instanceID: String, step: String)] { peek { $0.waitingSteps().map { ($0.instanceID.text, $0.step) } } ?? [] }

    func token() -> UInt32 {
        nextToken &+= 1
        return nextToken
    }

    /// Drops the engine and what is in flight (the app died); returns how many handler
    /// results and answers were lost. Tokens are never reused, so their events find nothing.
    func kill() -> (handlers: Int, answers: Int) {
        let lost = (handlers.count, answers.count)
        buildQueuedStatuses()
        process = nil
        handlers.removeAll()
        answers.removeAll()
        inFlight = nil
        return lost
    }
}
