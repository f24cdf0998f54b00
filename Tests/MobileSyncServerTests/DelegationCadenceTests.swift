@testable import DeviceWorkflows
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

    /// A client driven through one sync the server answers with `interval` at `tick`.
    static func answer(_ client: inout SyncClient, interval: Int, tick: UInt64) {
        _ = client.handle(.syncRequested, now: .zero)
        _ = client.handle(.outboxRead(OutboxBatch(entries: [], acks: [])), now: .zero)
        _ = client.handle(.answered(.accepted(SyncResponse(commands: [], syncIntervalSecs: interval)), tick: tick), now: .zero)
    }

    static func status(_ instance: String, state: String = "Running") -> StatusUpdate {
        StatusUpdate(instanceID: instance, sequenceName: "s", state: state, currentStep: nil, handler: nil, timestamp: "2026-01-01T00:00:00Z")
    }

    static func approval(_ instance: String, _ block: String, prompt: String = "ok?") -> ApprovalRequest {
        ApprovalRequest(instanceID: instance, blockID: block, sequenceName: "s", prompt: prompt, choices: nil, storeAs: nil, timeoutSeconds: nil)
    }

    @Test("the interval is the server's hint clamped to 5…3600 s, counted in base ticks; one request at a time; a push syncs next tick")
    func cadence() {
        var client = SyncClient(config: .init(deviceID: "d"), baseTickMs: 100, seed: StreamSeed(1))
        #expect(client.handle(.ticked(0), now: .zero) == [.readOutbox(OutboxLimits())], "a fresh client syncs at once")
        let read = client.handle(.outboxRead(OutboxBatch(entries: [.init(payload: .status(Self.status("i1")), seq: 1)], acks: ["c1"])), now: .zero)
        #expect(read == [.send(SyncRequest(deviceID: "d", statusUpdates: [Self.status("i1")], commandAcks: ["c1"]))])
        #expect(client.handle(.ticked(1), now: .zero).isEmpty && client.handle(.syncRequested, now: .zero).isEmpty, "one request at a time")
        let settled = client.handle(.answered(.accepted(SyncResponse(commands: [], syncIntervalSecs: 30)), tick: 10), now: .zero)
        #expect(settled == [.settle(SentBatch(entries: [.init(payload: .status(Self.status("i1")), seq: 1)], acks: ["c1"]), commands: [])])
        #expect(client.dueTick == 310 && !client.isDue(tick: 309, now: .zero) && client.isDue(tick: 310, now: .zero))
        #expect(client.handle(.answered(.unreachable, tick: 11), now: .zero).isEmpty, "an answer with nothing in flight changes nothing")
        Self.answer(&client, interval: 1, tick: 0)
        #expect(client.intervalSecs == 5 && client.dueTick == 50)
        var slow = SyncClient(config: .init(deviceID: "d"), baseTickMs: 500, seed: StreamSeed(1))
        Self.answer(&slow, interval: 99_999, tick: 0)
        #expect(slow.intervalSecs == 3_600 && slow.dueTick == 7_200)
        _ = client.handle(.pushReceived, now: .zero)
        #expect(client.isDue(tick: 1, now: .zero), "a push syncs on the next tick")
    }

    @Test("at LowBattery the same interval takes twice the time: it is counted in ticks, which stretch")
    func cadenceStretches() throws {
        var pair = try DevicePair(store: InMemoryWorkflowStore())
        var elapsed: [PowerState: TimeSpan] = [:]
        for power in [PowerState.unplugged, .lowBattery] {
            pair.device.engine.reportPowerState(power)
            try pair.sync()  // the server answers with its idle interval, 30 s
            var tick = pair.tick, clock = TimeSpan.zero
            while !(pair.device.syncClient?.isDue(tick: tick, now: .zero) ?? true) {
                tick += 1
                clock = clock + pair.device.engine.tickInterval
            }
            elapsed[power] = clock
        }
        #expect(elapsed[.unplugged] == .seconds(30) && elapsed[.lowBattery] == .seconds(60))
    }

    @Test("failures back off exponentially with jitter, never sooner than Retry-After, and success resets")
    func backoff() {
        var client = SyncClient(config: .init(deviceID: "d"), baseTickMs: 100, seed: StreamSeed(7))
        func fail(_ answer: SyncAnswer) -> Instant {
            _ = client.handle(.syncRequested, now: .zero)
            _ = client.handle(.outboxRead(OutboxBatch(entries: [], acks: [])), now: .zero)
            guard case .backOff(let until)? = client.handle(.answered(answer, tick: 0), now: .zero).first else { return .zero }
            return until
        }
        let delays = (0..<12).map { _ in (fail(.unreachable) - Instant.zero).nanoseconds }
        #expect(delays[0] >= 500_000_000 && delays[0] < 1_500_000_000)
        #expect(delays[3] >= 4_000_000_000 && delays[3] < 12_000_000_000)
        #expect(delays.allSatisfy { $0 < 450_000_000_000 }, "capped at 5 min × 1.5")
        #expect(!client.isDue(tick: 999, now: .zero + .seconds(1)) && client.isDue(tick: 0, now: .zero + .seconds(451)))
        #expect(client.nextDeadline != nil)
        #expect(fail(.refused(status: 503, retryAfter: .seconds(3_000))) >= .zero + .seconds(3_000))
        #expect(SyncAnswer(status: 429, retryAfter: "120", body: []) == .refused(status: 429, retryAfter: .seconds(120)))
        #expect(SyncAnswer(status: 200, retryAfter: nil, body: Array("{oops".utf8)) == .refused(status: 200, retryAfter: nil))
        Self.answer(&client, interval: 30, tick: 0)
        #expect(client.failures == 0 && client.nextDeadline == nil)
    }

    static func outboxConformance<S: SyncOutboxStore & WorkflowStore>(_ store: inout S) throws {
        try store.enqueue(.status(Self.status("i1", state: "Running")))
        try store.enqueue(.approval(Self.approval("i1", "g", prompt: "first")))
        let first = try store.outbox(.status, limit: 10)
        try store.enqueue(.status(Self.status("i1", state: "Waiting")))
        try store.enqueue(.approval(Self.approval("i1", "g", prompt: "second")))
        #expect(try store.outbox(.status, limit: 10).map(\.payload) == [.status(Self.status("i1", state: "Waiting"))], "statuses coalesce")
        #expect(try store.outbox(.approval, limit: 10).map(\.payload) == [.approval(Self.approval("i1", "g", prompt: "first"))],
                "approvals are kept once")
        try store.removeSent(first)
        #expect(try store.outboxCount() == 2, "an entry rewritten while in flight stays")
        try store.removeSent(try store.outbox(.status, limit: 10) + (try store.outbox(.approval, limit: 10)))
        #expect(try store.outboxCount() == 0)
        try store.begin()
        try store.markExecuted("c1", at: .zero)
        try store.enqueue(.status(Self.status("i2")))
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

    @Test("a drained outbox and a pruned command log give their storage back; a rolled-back drain restores every entry")
    func drainedOutboxReleasesStorage() throws {
        var store = InMemoryWorkflowStore()
        for instance in 0..<40 { try store.enqueue(.status(Self.status("i\(instance)"))) }
        let queued = try store.outbox(.status, limit: 100)
        try store.begin()
        try store.removeSent(queued)
        #expect(store.committed.outbox.capacity == 0, "an empty outbox holds no slots")
        store.rollback()
        #expect(try store.outbox(.status, limit: 100) == queued, "the rollback puts every entry back, in order")
        try store.removeSent(queued)
        #expect(try store.outboxCount() == 0 && store.committed.outbox.capacity == 0)
        let commands = (0..<40).map { "c\($0)" }
        for id in commands { try store.markExecuted(id, at: .zero) }
        try store.acknowledged(commands)
        try store.pruneExecuted(before: .zero + .seconds(1))
        #expect(try !store.isExecuted("c0") && store.committed.executed.capacity == 0)
    }

    @Test("outbox conformance: both stores coalesce, keep, roll back and acknowledge alike")
    func outboxStores() throws {
        var memory = InMemoryWorkflowStore()
        try Self.outboxConformance(&memory)
        var sqlite = try SQLiteWorkflowStore(path: TestPaths.scratchDirectory("outbox").appendingPathComponent("d.sqlite").path)
        try Self.outboxConformance(&sqlite)
    }
}
