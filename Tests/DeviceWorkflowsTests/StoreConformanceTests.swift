import Foundation
import Testing
import LabKernel
import LabStore
import LabTestSupport
@testable import DeviceWorkflows
import Benchmarks
@testable import WorkflowHost
@testable import Orch8Wire

/// The stores under test. Each conformance body below runs against both.
enum StoreKind: String, CaseIterable, Sendable {
    case memory, sqlite

    func make(_ dir: URL) throws -> any WorkflowStore {
        switch self {
        case .memory: return InMemoryWorkflowStore()
        case .sqlite: return try SQLiteWorkflowStore(path: dir.appendingPathComponent("device-\(UUID().uuidString).sqlite").path)
        }
    }
}

@Suite("Workflow stores: one conformance suite, both stores")
struct StoreConformanceTests {
    func host(_ kind: StoreKind) throws -> EngineHost<AnyStore> {
        let store = AnyStore(try kind.make(TestPaths.scratchDirectory("store")))
        return EngineHost(engine: MobileEngine(config: config(), handlers: BuiltinHandlers.names, seed: StreamSeed(1)), store: store)
    }

    @Test("a finished run reads back identically: sequences in load order, instances field for field", arguments: StoreKind.allCases)
    func roundTrip(kind: StoreKind) throws {
        var host = try host(kind)
        for name in ["feature-access", "payment-verification", "kyc-checks", "sub-sequence-kyc"] { _ = try host.loadSequence(json: workflowJSON(name)) }
        host.answers = ["consent_request": ["granted"], "access_approval": ["granted"]]
        let a = try host.start("feature-access", dedupKey: "k1")
        let b = try host.start("payment-verification")
        _ = try host.start("sub-sequence-kyc")
        try host.runUntilIdle()
        let state = try host.store.loadState()
        #expect(state.sequences.count == 4)
        #expect(state.sequences.first?.contains("\"feature-access\"") == true)
        #expect(state.instances.map(\.id) == host.engine.allInstances.map(\.id))
        for stored in state.instances {
            var live = try #require(host.engine.instance(stored.id))
            live.updatedAt = stored.updatedAt
            #expect(stored == live, "instance \(stored.id) differs after the round trip")
        }
        #expect(state.instances.first { $0.id == a }?.dedupKey == "k1")
        #expect(state.instances.first { $0.id == b }?.state == .waiting)
    }

    @Test("a rolled-back batch leaves nothing; a committed one stays", arguments: StoreKind.allCases)
    func transactions(kind: StoreKind) throws {
        var host = try host(kind)
        _ = try host.loadSequence(json: workflowJSON("kyc-checks"))
        let id = try host.start("kyc-checks")
        var instance = try #require(host.engine.instance(id))
        instance.data["marker"] = "rolled back"
        try host.store.begin()
        try host.store.apply(.persist(InstanceSnapshot(instance)))
        try host.store.apply(.delete(instanceID: instance.instanceID, number: instance.sequenceNumber))
        host.store.rollback()
        #expect(try host.store.loadState().instances.first?.data["marker"] == nil)
        instance.data["marker"] = "kept"
        try host.store.begin()
        try host.store.apply(.persist(InstanceSnapshot(instance)))
        try host.store.commit()
        #expect(try host.store.loadState().instances.first?.data["marker"] == "kept")
    }

    @Test("the journal keeps a result until it is forgotten; a finished run leaves it empty", arguments: StoreKind.allCases)
    func journal(kind: StoreKind) throws {
        var host = try host(kind)
        _ = try host.loadSequence(json: workflowJSON("kyc-checks"))
        _ = try host.start("kyc-checks")
        let key = InvocationKey(instance: 0, node: 1, attempt: 1)
        try host.store.journal(key, .success(["verified": true]))
        #expect(try host.store.journaledOutcome(key) == .success(["verified": true]))
        #expect(try host.store.journaledOutcome(InvocationKey(instance: 0, node: 1, attempt: 9)) == nil)
        try host.store.forgetJournal([key])
        #expect(try host.store.journaledOutcome(key) == nil)
        // A whole run journals every handler result and forgets each once it is committed.
        try host.runUntilIdle()
        #expect(host.handlerRuns.count == 2)
        for run in host.handlerRuns.keys { #expect(try host.store.journaledOutcome(run) == nil) }
    }

    @Test("the journal forgets in and out of order, and a rolled-back batch of writes and deletes leaves it as it was",
          arguments: StoreKind.allCases)
    func journalRollback(kind: StoreKind) throws {
        var store = try host(kind).store
        let keys = (0..<5).map { InvocationKey(instance: UInt64($0), node: 1, attempt: 1) }
        try store.begin()
        for key in keys.prefix(3) { try store.journal(key, .success(["n": .number(Double(key.instance))])) }
        try store.commit()
        try store.begin()
        try store.forgetJournal([keys[1]])
        try store.forgetJournal([keys[0]])
        try store.journal(keys[3], .permanent("late"))
        store.rollback()
        #expect(Set(try store.journaledKeys()) == Set(keys.prefix(3)))
        for key in keys.prefix(3) { #expect(try store.journaledOutcome(key) == .success(["n": .number(Double(key.instance))])) }
        try store.begin()
        try store.forgetJournal([keys[0], keys[2]])
        try store.journal(keys[4], .retryable("again"))
        try store.commit()
        #expect(Set(try store.journaledKeys()) == [keys[1], keys[4]])
        #expect(try store.journaledOutcome(keys[0]) == nil && store.journaledOutcome(keys[4]) == .retryable("again"))
        // A tick's worth journaled, then forgotten in order (the in-memory log drops them).
        let many = (10..<210).map { InvocationKey(instance: UInt64($0), node: 2, attempt: 1) }
        try store.begin()
        for key in many { try store.journal(key, .success([:])) }
        try store.commit()
        try store.begin()
        try store.forgetJournal(many)
        try store.commit()
        #expect(try Set(store.journaledKeys()) == [keys[1], keys[4]] && store.journaledOutcome(keys[1]) != nil)
    }

    @Test("telemetry is appended in order and removed once flushed", arguments: StoreKind.allCases)
    func telemetry(kind: StoreKind) throws {
        var host = try host(kind)
        _ = try host.loadSequence(json: workflowJSON("kyc-checks"))
        _ = try host.start("kyc-checks")
        try host.runUntilIdle()
        let events = try host.store.telemetry(limit: 100)
        #expect(events.count >= 5)
        #expect(events.map(\.id) == events.map(\.id).sorted())
        try host.store.removeTelemetry(through: events[2].id)
        let rest = try host.store.telemetry(limit: 100)
        #expect(rest.map(\.id) == events.dropFirst(3).map(\.id) && rest.map(\.event) == events.dropFirst(3).map(\.event))
        #expect(try host.store.telemetry(limit: 2).map(\.id) == rest.prefix(2).map(\.id))
        // A flush's events arrive as one effect; a rolled-back batch records none of them.
        try host.store.begin()
        try host.store.apply(.telemetry(Array(events.map(\.event).prefix(2))))
        host.store.rollback()
        #expect(try host.store.telemetry(limit: 100).map(\.id) == rest.map(\.id))
        try host.store.begin()
        try host.store.apply(.telemetry(Array(events.map(\.event).prefix(2))))
        try host.store.commit()
        let grown = try host.store.telemetry(limit: 100)
        #expect(grown.count == rest.count + 2 && grown.suffix(2).map(\.event) == Array(events.map(\.event).prefix(2)))
        #expect(grown.map(\.id) == grown.map(\.id).sorted() && Set(grown.map(\.id)).count == grown.count)
    }

    /// Runs `count` onboarding flows (every wait answered) tick by tick to completion,
    /// calling `check` once the flows are started (tick 0) and after each tick, with the
    /// tick's number; returns the ticks taken.
    func runOnboarding(_ host: inout EngineHost<AnyStore>, count: Int,
                       check: (inout EngineHost<AnyStore>, Int) throws -> Void) throws -> Int {
        host.standingAnswers = EngineBenchmark.answers
        _ = try host.loadSequence(json: workflowJSON("onboarding-flow"))
        for _ in 0..<count { _ = try host.start("onboarding-flow") }
        try check(&host, 0)
        var ticks = 0
        while host.completed.count < count && ticks < 100 {
            try host.tick()
            ticks += 1
            try check(&host, ticks)
        }
        #expect(host.completed.count == count && host.handlerRunCount == count * 8)
        return ticks
    }

    @Test("snapshots the store let go of are reused by later flushes, and what is stored always equals the engine after a commit",
          arguments: StoreKind.allCases)
    func recycledSnapshots(kind: StoreKind) throws {
        var host = try host(kind)
        let ticks = try runOnboarding(&host, count: 20) { host, tick in
            let stored = try host.store.loadState().instances
            #expect(stored == host.engine.allInstances, "tick \(tick): the store differs from the engine")
        }
        // Each tick after the first reuses the snapshots the previous commit replaced.
        #expect(host.engine.reusedSnapshots >= 20 * (ticks - 2), "reused \(host.engine.reusedSnapshots) in \(ticks) ticks")
    }

    @Test("a busy instance gets its own old snapshot back: spares are refilled in the order the store let go of them")
    func sparesGoBackToTheirInstances() throws {
        var host = try host(.memory)
        var numbers: [UInt64] = []
        var held: [[ObjectIdentifier?]] = []
        var same = 0
        var compared = 0
        _ = try runOnboarding(&host, count: 50) { host, tick in
            guard let store = host.store.base as? InMemoryWorkflowStore else { return }
            if tick == 0 { numbers = host.engine.instances.map(\.sequenceNumber) }
            // Up to tick 6 every tick persists every instance; the snapshots a commit lets
            // go of are the ones from two ticks back, and the next flush refills them.
            guard (1...6).contains(tick) else { return }
            held.append(numbers.map { number in store.committed.instances[number].map(ObjectIdentifier.init) })
            guard held.count >= 3 else { return }
            for (now, before) in zip(held[held.count - 1], held[held.count - 3]) {
                compared += 1
                if now != nil && now == before { same += 1 }
            }
        }
        #expect(host.engine.reusedSnapshots > 0 && compared == 200)
        #expect(same * 10 >= compared * 9, "\(same) of \(compared) instances got their own snapshot back")
    }

    @Test("a snapshot something else still holds is never refilled by a later flush")
    func heldSnapshotsStay() throws {
        var host = try host(.memory)
        var held: (store: InMemoryWorkflowStore, instances: [WorkflowInstance])?
        _ = try runOnboarding(&host, count: 20) { host, tick in
            // A copy of the store holds every snapshot of tick 2; the store lets go of them.
            guard tick == 2, let store = host.store.base as? InMemoryWorkflowStore else { return }
            held = (store, try store.loadState().instances)
        }
        let (store, instances) = try #require(held)
        #expect(host.engine.reusedSnapshots > 0)
        #expect(try store.loadState().instances == instances, "a held snapshot changed")
    }

    @Test("a tick is one transaction: snapshots, the journal of the handlers it ran and the journal it consumed", arguments: StoreKind.allCases)
    func oneTransactionPerTick(kind: StoreKind) throws {
        var host = try host(kind)
        var before = 0
        _ = try runOnboarding(&host, count: 50) { host, tick in
            if tick > 0 { #expect(host.store.committed - before == 1, "tick \(tick) committed \(host.store.committed - before) times") }
            before = host.store.committed
        }
        #expect(host.store.begun == host.store.committed && !host.store.inBatch)
    }

    @Test("the engine benchmark runs every store each round on a fresh store, and keeps the best round")
    func benchmarkRounds() throws {
        let dir = TestPaths.scratchDirectory("bench")
        var made = 0
        let contenders = StoreKind.allCases.map { kind in
            EngineBenchmark.Contender(name: kind.rawValue) {
                made += 1
                return try kind.make(dir)
            }
        }
        var tick = 0.0
        let results = try EngineBenchmark.compare(contenders, rounds: 3, sequenceJSON: workflowJSON("onboarding-flow"), instances: 20,
                                                  clock: { tick += 1; return tick })
        #expect(made == 6 && results.map(\.best.store) == ["memory", "sqlite"])
        for result in results {
            #expect(result.best.completed == 20 && result.best.steps == 20 * 8)
            #expect(result.slowest <= result.fastest && result.fastest == result.best.stepsPerSecond)
        }
    }

    /// A kyc-checks instance run to completion over a SQLite file at `path`.
    static func finishedRun(in path: String) throws -> (EngineHost<SQLiteWorkflowStore>, String) {
        var host = EngineHost(engine: MobileEngine(config: config(), handlers: BuiltinHandlers.names, seed: StreamSeed(1)),
                              store: try SQLiteWorkflowStore(path: path))
        _ = try host.loadSequence(json: workflowJSON("kyc-checks"))
        let id = try host.start("kyc-checks")
        try host.runUntilIdle()
        return (host, id)
    }

    @Test("the SQLite store is a real file another connection reads the same way")
    func sqliteFile() throws {
        let path = TestPaths.scratchDirectory("store").appendingPathComponent("device.sqlite").path
        let (_, id) = try Self.finishedRun(in: path)
        let reopened = try SQLiteWorkflowStore(path: path)
        #expect(try reopened.loadState().instances.first?.id == id)
        let rows = try reopened.database.query("SELECT state, json_extract(context, '$.compliance.compliant') FROM instances")
        #expect(rows == [[.text("Completed"), .integer(1)]])
        let tables = Set(try reopened.database.query("SELECT name FROM sqlite_master WHERE type = 'table'").compactMap { $0.first?.text })
        #expect(tables.isSuperset(of: ["sequences", "instances", "handler_journal", "telemetry", "sync_outbox"]))
    }

    @Test("a device file of schema version 1 (instances keyed by UUID) opens, migrated, with its instances")
    func migratesVersion1() throws {
        let path = TestPaths.scratchDirectory("store").appendingPathComponent("device-v1.sqlite").path
        // A finished run in the current schema, copied row for row into the version 1 table.
        let (host, id) = try Self.finishedRun(in: path)
        let before = try host.store.loadState().instances
        try host.store.database.execute("""
            ALTER TABLE instances RENAME TO current;
            CREATE TABLE instances (
                id TEXT PRIMARY KEY, sequence_name TEXT NOT NULL, sequence_version INTEGER NOT NULL, state TEXT NOT NULL,
                seq INTEGER NOT NULL, dedup_key TEXT, created_ns INTEGER NOT NULL, updated_ns INTEGER NOT NULL,
                context TEXT NOT NULL, tree BLOB NOT NULL, meta TEXT NOT NULL);
            CREATE INDEX instances_state ON instances (state);
            INSERT INTO instances SELECT id, sequence_name, sequence_version, state, seq, dedup_key, created_ns, updated_ns, context, tree, meta FROM current;
            DROP TABLE current;
            PRAGMA user_version = 0;
            """)
        let reopened = try SQLiteWorkflowStore(path: path)
        #expect(try reopened.loadState().instances == before && before.first?.id == id)
        let table = try reopened.database.query("SELECT sql FROM sqlite_master WHERE name = 'instances'").first?.first?.text ?? ""
        #expect(table.contains("seq INTEGER PRIMARY KEY"))
        #expect(try reopened.database.query("PRAGMA user_version") == [[.integer(2)]])
        #expect(try reopened.database.query("SELECT name FROM sqlite_master WHERE name IN ('instances_v1', 'instances_state')").isEmpty)
    }

    @Test("the binary tree form round-trips every node state and every optional field")
    func treeCodec() {
        var nodes: [ExecNode] = []
        let states: [NodeState] = [.pending, .running, .waiting, .completed, .failed, .cancelled, .skipped]
        for (i, state) in states.enumerated() {
            var node = ExecNode(kind: i % 2 == 0 ? .block(Int32(i)) : .list(owner: Int32(i) - 2, list: 3), parent: Int32(i) - 1, state: state)
            node.cursor = Int32(i * 3)
            (node.firstChild, node.lastChild, node.nextSibling, node.childCount) = (Int32(i), Int32(i + 1), -1, 2)
            node.attempt = Int16(i)
            node.inFlight = i % 2 == 1
            node.gatePassed = i % 3 == 0
            if i & 1 != 0 { node.startedAt = Instant(nanoseconds: Int64(i) * 1_000_000_007) }
            if i & 2 != 0 { node.completedAt = Instant(nanoseconds: -Int64(i)) }
            switch i % 4 {
            case 1: node.retryAt = Instant(nanoseconds: Int64.max - Int64(i))
            case 2: node.deadline = Instant(nanoseconds: 42)
            case 3: node.childInstance = UInt64.max - UInt64(i)
            default: break
            }
            nodes.append(node)
        }
        #expect(TreeCodec.decode(TreeCodec.encode(nodes)) == nodes)
        var reused: [UInt8] = [9, 9, 9]
        TreeCodec.encode(nodes, into: &reused)
        #expect(reused == TreeCodec.encode(nodes))
        #expect(TreeCodec.decode(Array(reused.dropLast())) == nil)
    }

    @Test("a node's retry time, deadline and child instance share one slot: clearing one leaves the others, and a node is one cache line")
    func nodeSlot() {
        var node = ExecNode(kind: .block(0), parent: -1, state: .running)
        node.retryAt = Instant(nanoseconds: 7)
        node.deadline = nil
        node.childInstance = nil
        #expect(node.retryAt == Instant(nanoseconds: 7) && node.deadline == nil && node.childInstance == nil)
        node.retryAt = nil
        node.deadline = Instant(nanoseconds: 9)
        #expect(node.retryAt == nil && node.deadline == Instant(nanoseconds: 9))
        node.deadline = nil
        node.childInstance = UInt64.max
        node.retryAt = nil
        #expect(node.childInstance == UInt64.max && node.retryAt == nil && node.deadline == nil)
        #expect(MemoryLayout<ExecNode>.stride == 64)
    }

    @Test("an instance's boxed details keep value semantics: changing a copy (a snapshot's or the engine's) never changes the other")
    func detailsCopyOnWrite() {
        var live = MobileEngine.placeholder
        live.sequenceName = "a"
        let snapshot = live
        live.nodeErrors[3] = "boom"
        live.forEachItems[2] = ["x"]
        live.skipSteps.insert("s")
        live.error = "failed"
        live.pendingUpdate = .init(sequenceName: "n", version: 2)
        #expect(snapshot.nodeErrors.isEmpty && snapshot.forEachItems.isEmpty && snapshot.skipSteps.isEmpty)
        #expect(snapshot.error == nil && snapshot.pendingUpdate == nil && snapshot.sequenceName == "a")
        #expect(live.nodeErrors == [3: "boom"] && live.skipSteps == ["s"] && live != snapshot)
        var copy = live
        copy.sequenceName = "b"
        #expect(live.sequenceName == "a" && copy.sequenceName == "b" && copy.nodeErrors == live.nodeErrors)
        #expect(MemoryLayout<WorkflowInstance>.stride <= 128)
    }
}

/// A type-erased store so one test body serves both kinds.
struct AnyStore: WorkflowStore {
    var base: any WorkflowStore
    /// Batches opened and committed, to check how a host groups its writes.
    var begun = 0, committed = 0
    var inBatch = false
    init(_ base: any WorkflowStore) { self.base = base }
    mutating func begin() throws {
        if !inBatch { begun += 1 }
        inBatch = true
        try base.begin()
    }
    mutating func commit() throws {
        if inBatch { committed += 1 }
        inBatch = false
        try base.commit()
    }
    mutating func rollback() {
        inBatch = false
        base.rollback()
    }
    mutating func apply(_ effect: consuming EngineEffect) throws { try base.apply(effect) }
    mutating func journal(_ key: InvocationKey, _ outcome: HandlerOutcome) throws { try base.journal(key, outcome) }
    func journaledOutcome(_ key: InvocationKey) throws -> HandlerOutcome? { try base.journaledOutcome(key) }
    func journaledKeys() throws -> [InvocationKey] { try base.journaledKeys() }
    mutating func takeSpareSnapshots(into engineSpares: inout SpareSnapshots) { base.takeSpareSnapshots(into: &engineSpares) }
    func loadState() throws -> MobileEngine.StoredState { try base.loadState() }
    func telemetry(limit: Int) throws -> [(id: Int64, event: TelemetryEvent)] { try base.telemetry(limit: limit) }
    mutating func removeTelemetry(through id: Int64) throws { try base.removeTelemetry(through: id) }
    func telemetryCount() throws -> Int { try base.telemetryCount() }
    mutating func forgetJournal(_ keys: [InvocationKey]) throws { try base.forgetJournal(keys) }
    mutating func enqueue(_ payload: OutboxPayload) throws { try base.enqueue(payload) }
    func outbox(_ kind: OutboxEntry.Kind, limit: Int) throws -> [OutboxEntry] { try base.outbox(kind, limit: limit) }
    func outboxCount() throws -> Int { try base.outboxCount() }
    mutating func removeSent(_ entries: [OutboxEntry]) throws { try base.removeSent(entries) }
    mutating func markExecuted(_ commandID: String, at: Instant) throws { try base.markExecuted(commandID, at: at) }
    func isExecuted(_ commandID: String) throws -> Bool { try base.isExecuted(commandID) }
    mutating func reacknowledge(_ commandID: String) throws { try base.reacknowledge(commandID) }
    func pendingAcks(limit: Int) throws -> [String] { try base.pendingAcks(limit: limit) }
    mutating func acknowledged(_ commandIDs: [String]) throws { try base.acknowledged(commandIDs) }
    mutating func pruneExecuted(before: Instant) throws { try base.pruneExecuted(before: before) }
    func syncValue(_ key: String) throws -> String? { try base.syncValue(key) }
    mutating func setSyncValue(_ key: String, _ value: String?) throws { try base.setSyncValue(key, value) }
}
