import Foundation
import Testing
import DeviceWorkflows
import LabKernel
import LabTestSupport
import Orch8Wire
@testable import Simulator

/// The simulator's hold on one device's engine and store.
@Suite("Device engine")
struct DeviceEngineTests {
    /// One device's engine with `payment-verification` loaded.
    static func device() throws -> DeviceEngine {
        let json = try String(contentsOf: TestPaths.packageRoot.appendingPathComponent("simulations/workflows/payment-verification.json"), encoding: .utf8)
        let slot = DeviceEngine(seed: StreamSeed(5))
        var engine = MobileEngine(config: MobileEngineConfig(), handlers: BuiltinHandlers.names, seed: StreamSeed(5))
        var effects: [EngineEffect] = []
        _ = try engine.loadSequence(json: json, into: &effects)
        slot.process = DeviceEngine.AppProcess(engine: engine)
        return slot
    }

    /// The outbox's statuses in the order a sync reads them, after the device has built
    /// what it queued to build later.
    static func statuses(_ slot: DeviceEngine) throws -> [OutboxEntry] {
        try slot.outboxWillBeRead()
        return try slot.store.outbox(.status, limit: .max)
    }

    @Test("a status queued to be built later, when the outbox is read or the app is killed, is the one built at once: same entries, same order")
    func statusesBuiltLater() throws {
        // Two copies of one device: one builds each status as the instance persists (the
        // SDK reporter's way), the other queues placeholders (`queueStatus(of:)`).
        let atOnce = try Self.device(), later = try Self.device()
        var compared = 0, terminal = 0
        for round in 0..<40 {
            let now = Instant.zero + .seconds(Int64(round))
            for slot in [atOnce, later] {
                slot.clock = now
                var effects: [EngineEffect] = []
                if round % 4 == 0 { _ = try slot.engine.start("payment-verification", input: ["amount": 20], now: now, into: &effects) }
                slot.engine.tick(now: now, into: &effects)
                // Handlers answer at once; every third instance's fraud check fails for good.
                for case .invoke(let call) in effects {
                    let fails = call.handler == "fraud_check" && call.key.instance % 3 == 0
                    slot.engine.handlerFinished(call.key, fails ? .permanent("declined") : .success([:]), now: now, into: &effects)
                }
                for effect in effects {
                    guard case .persist(let snapshot) = effect else { continue }
                    try slot.store.apply(effect)
                    guard snapshot.instance.parent == nil else { continue }
                    if slot === atOnce {
                        var driver = slot
                        try driver.queueStatus(snapshot.instance.instanceID)
                        if snapshot.instance.state.isTerminal { terminal += 1 }
                    } else {
                        try slot.queueStatus(of: snapshot.instance)
                    }
                }
            }
            // Every few rounds a sync reads both outboxes and takes what it read.
            if round % 5 == 4 {
                let sent = try Self.statuses(atOnce), built = try Self.statuses(later)
                #expect(built == sent, "round \(round)")
                #expect(!built.contains { if case .status(let s) = $0.payload { s.timestamp.isEmpty } else { true } }, "no placeholder is read")
                compared += sent.count
                try atOnce.store.removeSent(sent)
                try later.store.removeSent(built)
            }
        }
        #expect(compared > 10 && terminal > 0, "\(compared) statuses compared, \(terminal) of finished instances")
        // Queued but not read when the app is killed: built before the engine goes.
        try atOnce.store.removeSent(Self.statuses(atOnce))
        try later.store.removeSent(Self.statuses(later))
        for slot in [atOnce, later] {
            slot.clock = .zero + .seconds(60)
            var effects: [EngineEffect] = []
            _ = try slot.engine.start("payment-verification", input: ["amount": 20], now: slot.clock, into: &effects)
            slot.engine.tick(now: slot.clock, into: &effects)
            for case .persist(let snapshot) in effects {
                if slot === atOnce {
                    var driver = slot
                    try driver.queueStatus(snapshot.instance.instanceID)
                } else {
                    try slot.queueStatus(of: snapshot.instance)
                }
            }
            _ = slot.kill()
        }
        let afterKill = try later.store.outbox(.status, limit: .max), expected = try atOnce.store.outbox(.status, limit: .max)
        #expect(!afterKill.isEmpty && afterKill == expected)
    }
}
