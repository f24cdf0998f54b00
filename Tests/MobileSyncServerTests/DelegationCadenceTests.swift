import DeviceWorkflows
import WorkflowHost
import Orch8Wire
import Foundation
import LabKernel
import LabStore
import LabTestSupport
import Testing
@testable import MobileSyncServer

@Suite("Credential delegation, cadence and the outbox")
struct DelegationCadenceTests {
    static let charge = """
    {"id": "00000000-0000-0000-0000-0000000000c1", "tenant_id": "mobile", "namespace": "default", "name": "charge", "version": 1,
     "blocks": [
       {"type": "step", "id": "prepare", "handler": "noop"},
       {"type": "step", "id": "call_api", "handler": "echo",
        "params": {"authorization": "credentials://payments-api/token", "account": "credentials://payments-api/account", "amount": 5}},
       {"type": "step", "id": "done", "handler": "noop"}
     ]}
    """

    @Test("a credentials:// step is delegated, resumed by step_result, and no secret is written to the device database")
    func delegation() throws {
        let path = TestPaths.scratchDirectory("delegation").appendingPathComponent("device.sqlite").path
        var pair = try DevicePair(store: try SQLiteWorkflowStore(path: path), workflows: [], extra: [Self.charge])
        _ = try pair.server.send("POST", "/credentials", ["id": "payments-api", "name": "Payments", "kind": "api_key",
                                                          "value": ["token": "sk_live_TOPSECRET", "account": "acct-SECRET-9"]], key: pair.key)
        let id = try pair.device.start("charge")
        try pair.device.runUntilIdle(limit: .seconds(10))
        #expect(pair.device.engine.instance(id)?.state == .running, "the delegated step waits for the server")
        #expect(try pair.device.store.outbox(.delegation, limit: 10).count == 1)
        try pair.sync()  // sends the delegation; the server queues step_result
        try pair.sync()  // receives it; the handler runs with the secrets
        try pair.device.runUntilIdle(limit: .seconds(10))
        let instance = try #require(pair.device.engine.instance(id))
        #expect(instance.state == .completed)
        #expect(instance.data["call_api"] == ["authorization": "[redacted]", "account": "[redacted]", "amount": 5])
        try pair.sync()
        // Nothing of the secrets on disk: the database file and its write-ahead log.
        _ = try pair.device.store.database.query("PRAGMA wal_checkpoint(FULL)")
        for file in [path, path + "-wal"] {
            let bytes = (try? Data(contentsOf: URL(fileURLWithPath: file))) ?? Data()
            let text = String(decoding: bytes, as: UTF8.self)
            #expect(!text.contains("TOPSECRET") && !text.contains("acct-SECRET"), "\(file) holds a secret")
        }
    }

    @Test("a delegation the server cannot resolve fails the step with the server's reason")
    func delegationFails() throws {
        var pair = try DevicePair(store: InMemoryWorkflowStore(), workflows: [], extra: [Self.charge])
        let id = try pair.device.start("charge")
        try pair.device.runUntilIdle(limit: .seconds(10))
        try pair.sync()
        try pair.sync()
        try pair.device.runUntilIdle(limit: .seconds(10))
        let instance = try #require(pair.device.engine.instance(id))
        #expect(instance.state == .failed)
        #expect(instance.error?.contains("credential resolution failed: credential payments-api not found") == true, "\(instance.error ?? "")")
    }

    @Test("the interval is the server's hint clamped to 5…3600 s, counted in base ticks")
    func cadence() {
        var reporter = SyncReporter(config: .init(deviceID: "d"), seed: StreamSeed(1))
        #expect(reporter.isDue(tick: 0, now: .zero), "a fresh reporter syncs at once")
        reporter.began()
        #expect(!reporter.isDue(tick: 1, now: .zero), "one request at a time")
        reporter.succeeded(intervalHint: 30, tick: 10, baseTickMs: 100)
        #expect(reporter.dueTick == 310 && !reporter.isDue(tick: 309, now: .zero) && reporter.isDue(tick: 310, now: .zero))
        reporter.succeeded(intervalHint: 1, tick: 0, baseTickMs: 100)
        #expect(reporter.intervalSecs == 5 && reporter.dueTick == 50)
        reporter.succeeded(intervalHint: 99_999, tick: 0, baseTickMs: 500)
        #expect(reporter.intervalSecs == 3_600 && reporter.dueTick == 7_200)
        reporter.forceSync()
        #expect(reporter.isDue(tick: 1, now: .zero), "a push syncs on the next tick")
    }

    @Test("at LowBattery the same interval takes twice the time: it is counted in ticks, which stretch")
    func cadenceStretches() throws {
        var pair = try DevicePair(store: InMemoryWorkflowStore())
        try pair.sync()
        var elapsed: [PowerState: TimeSpan] = [:]
        for power in [PowerState.unplugged, .lowBattery] {
            pair.device.engine.reportPowerState(power)
            var tick = pair.tick, clock = TimeSpan.zero
            pair.device.sync?.succeeded(intervalHint: 30, tick: tick, baseTickMs: 100)
            while !(pair.device.sync?.isDue(tick: tick, now: .zero) ?? true) {
                tick += 1
                clock = clock + pair.device.engine.tickInterval
            }
            elapsed[power] = clock
        }
        #expect(elapsed[.unplugged] == .seconds(30) && elapsed[.lowBattery] == .seconds(60))
    }

    @Test("failures back off exponentially with jitter, never sooner than Retry-After, and success resets")
    func backoff() {
        var reporter = SyncReporter(config: .init(deviceID: "d"), seed: StreamSeed(7))
        var delays: [Int64] = []
        for _ in 0..<12 {
            reporter.began()
            delays.append((reporter.failed(now: .zero) - Instant.zero).nanoseconds)
        }
        #expect(delays[0] >= 500_000_000 && delays[0] < 1_500_000_000)
        #expect(delays[3] >= 4_000_000_000 && delays[3] < 12_000_000_000)
        #expect(delays.allSatisfy { $0 < 450_000_000_000 }, "capped at 5 min × 1.5")
        #expect(!reporter.isDue(tick: 999, now: .zero + .seconds(1)) && reporter.isDue(tick: 0, now: .zero + .seconds(451)))
        reporter.began()
        let retryAfter = reporter.failed(now: .zero, retryAfter: .seconds(3_000))
        #expect(retryAfter >= .zero + .seconds(3_000))
        reporter.succeeded(intervalHint: 30, tick: 0, baseTickMs: 100)
        #expect(reporter.failures == 0)
    }

    static func outboxConformance<S: SyncOutboxStore & WorkflowStore>(_ store: inout S) throws {
        try store.enqueue(.status, key: "i1", payload: ["v": 1])
        try store.enqueue(.approval, key: "i1:g", payload: ["v": 1])
        let first = try store.outbox(.status, limit: 10)
        try store.enqueue(.status, key: "i1", payload: ["v": 2])
        try store.enqueue(.approval, key: "i1:g", payload: ["v": 2])
        #expect(try store.outbox(.status, limit: 10).map(\.payload) == [["v": 2]], "statuses coalesce")
        #expect(try store.outbox(.approval, limit: 10).map(\.payload) == [["v": 1]], "approvals are kept once")
        try store.removeSent(first)
        #expect(try store.outboxCount() == 2, "an entry rewritten while in flight stays")
        try store.removeSent(try store.outbox(.status, limit: 10) + (try store.outbox(.approval, limit: 10)))
        #expect(try store.outboxCount() == 0)
        try store.begin()
        try store.markExecuted("c1", at: .zero)
        try store.enqueue(.status, key: "i2", payload: [:])
        try store.setSyncValue("k", "v")
        store.rollback()
        let executed = try store.isExecuted("c1"), count = try store.outboxCount(), value = try store.syncValue("k")
        #expect(!executed && count == 0 && value == nil, "a rolled-back batch leaves nothing")
        try store.begin()
        try store.markExecuted("c1", at: .zero)
        try store.markExecuted("c2", at: .zero + .seconds(1))
        try store.commit()
        #expect(try store.pendingAcks(limit: 10) == ["c1", "c2"])
        try store.acknowledged(["c1"])
        let acks = try store.pendingAcks(limit: 10), marked = try store.isExecuted("c1")
        #expect(acks == ["c2"] && marked)
        try store.reacknowledge("c1")
        #expect(try store.pendingAcks(limit: 10) == ["c1", "c2"])
        try store.acknowledged(["c1", "c2"])
        try store.pruneExecuted(before: .zero + .milliseconds(500))
        let pruned = try store.isExecuted("c1"), kept = try store.isExecuted("c2")
        #expect(!pruned && kept)
        try store.setSyncValue("manifest_version", "7")
        #expect(try store.syncValue("manifest_version") == "7")
    }

    @Test("outbox conformance: both stores coalesce, keep, roll back and acknowledge alike")
    func outboxStores() throws {
        var memory = InMemoryWorkflowStore()
        try Self.outboxConformance(&memory)
        var sqlite = try SQLiteWorkflowStore(path: TestPaths.scratchDirectory("outbox").appendingPathComponent("d.sqlite").path)
        try Self.outboxConformance(&sqlite)
    }
}
