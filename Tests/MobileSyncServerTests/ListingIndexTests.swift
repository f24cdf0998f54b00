import DeviceWorkflows
import Orch8Wire
import LabKernel
import LabTestSupport
import Testing
@testable import MobileSyncServer

/// The listings read ordered indexes instead of scanning; these tests hold them to what a
/// scan of the tables answers, through random histories.
@Suite("Sync server: listings from ordered indexes")
struct ListingIndexTests {
    @Test("a sorted chunk list matches a sorted array through thousands of inserts and removals (chunks split and empty)")
    func sortedChunks() {
        var generator = SeededGenerator(seed: 9)
        var chunks = SortedChunks<Int>()
        var reference: [Int] = []
        for _ in 0..<20_000 {
            let key = Int(generator.next(below: 3_000))
            if generator.next(below: 3) == 0, let at = reference.firstIndex(of: key) {
                chunks.remove(key)
                reference.remove(at: at)
            } else {
                chunks.insert(key)
                reference.insert(key, at: reference.firstIndex { $0 > key } ?? reference.count)
            }
        }
        #expect(chunks.count == reference.count)
        #expect(chunks.prefix(.max, descending: false) == reference)
        #expect(chunks.prefix(7, descending: true) == Array(reference.reversed().prefix(7)))
        chunks.remove(-1)
        #expect(chunks.count == reference.count, "removing what is not there changes nothing")
    }

    @Test("approvals, statuses and devices listed by tenant, device, state and limit equal a scan of the tables, expiry included")
    func listingsEqualScans() throws {
        var h = try ServerHarness()
        let keys = ["acme": try h.tenant("acme"), "globex": try h.tenant("globex")]
        var generator = SeededGenerator(seed: 4)
        let devices = (0..<6).map { "phone-\($0)" }
        for (index, device) in devices.enumerated() { _ = try h.register(device, key: keys[index % 2 == 0 ? "acme" : "globex"]!) }
        for round in 0..<300 {
            h.now = h.now + .seconds(Int64(generator.next(below: 40)))
            let device = devices[Int(generator.next(below: 6))]
            let key = keys[Int(device.dropFirst(6))! % 2 == 0 ? "acme" : "globex"]!
            let instance = ServerHarness.uuid(round)
            let timeout: Int? = generator.next(below: 3) == 0 ? Int(generator.next(below: 600)) + 1 : nil
            _ = try h.sync(SyncRequest(deviceID: device,
                                       statusUpdates: [StatusUpdate(instanceID: ServerHarness.uuid(Int(generator.next(below: 40))), sequenceName: "s",
                                                                    state: "Running", currentStep: nil, handler: nil,
                                                                    timestamp: RFC3339.format(unixMilliseconds: Int64(generator.next(below: 1_000_000))), steps: nil)],
                                       approvalRequests: [ApprovalRequest(instanceID: instance, blockID: "gate", sequenceName: "s", prompt: "?",
                                                                          choices: nil, storeAs: nil, timeoutSeconds: timeout)]), key: key)
            if generator.next(below: 4) == 0, let pending = h.server.state.approvals.values.filter({ $0.state == .pending }).min(by: { $0.id < $1.id }) {
                _ = try h.send("POST", "/api/v1/mobile/approvals/\(pending.id)/resolve", ["output": ["value": "yes"]], key: h.root)
            }
        }
        func ids(_ reply: HTTPResponseMessage, _ field: String) -> [String] { reply.jsonBody?["items"]?.arrayValue?.compactMap { $0[field]?.stringValue } ?? [] }
        for state in [nil, "pending", "resolved", "expired"] {
            for (tenant, key) in [("", h.root), ("acme", keys["acme"]!), ("globex", keys["globex"]!)] {
                for device in [String?.none] + devices.prefix(2).map(Optional.some) {
                    for limit in [1, 7, 500] {
                        var query = "limit=\(limit)"
                        if let state { query += "&state=\(state)" }
                        if let device { query += "&device_id=\(device)" }
                        let reply = try h.send("GET", "/api/v1/mobile/approvals?\(query)", key: key)
                        let nowMs = h.server.wallClock.unixMilliseconds(at: h.now)
                        let scan = h.server.state.approvals.values
                            .filter { (tenant.isEmpty || $0.tenantID == tenant) && (device == nil || $0.deviceID == device) }
                            .filter { approval in
                                guard let state else { return true }
                                return approval.state.rawValue == state
                            }
                            .sorted { ($0.createdAtMs, $0.id) < ($1.createdAtMs, $1.id) }
                        #expect(ids(reply, "id") == scan.prefix(limit).map { $0.id }, "\(tenant) \(query)")
                        #expect(reply.jsonBody?["total"]?.numberValue == Double(scan.count), "\(tenant) \(query)")
                        #expect(!scan.contains { $0.state == .pending && ($0.expiryKey.map { $0.deadlineMs <= nowMs } ?? false) }, "due expiries applied")
                    }
                }
                let statuses = try h.send("GET", "/api/v1/mobile/status?limit=9", key: key)
                let scan = h.server.state.statuses.values.flatMap(\.values).filter { tenant.isEmpty || $0.tenantID == tenant }
                    .sorted { ($0.reportedAtMs, $0.instanceID, $0.deviceID) > ($1.reportedAtMs, $1.instanceID, $1.deviceID) }
                #expect(ids(statuses, "instance_id") == scan.prefix(9).map(\.instanceID) && statuses.jsonBody?["total"]?.numberValue == Double(scan.count))
                for device in devices.prefix(3) where tenant.isEmpty || h.server.state.devices[device]?.tenantID == tenant {
                    let ofDevice = try h.send("GET", "/api/v1/mobile/status?limit=3&device_id=\(device)", key: key)
                    let rows = scan.filter { $0.deviceID == device }
                    #expect(ids(ofDevice, "instance_id") == rows.prefix(3).map(\.instanceID) && ofDevice.jsonBody?["total"]?.numberValue == Double(rows.count),
                            "\(tenant) \(device)")
                }
                let listed = try h.send("GET", "/api/v1/mobile/devices?limit=2", key: key)
                let deviceScan = h.server.state.devices.values.filter { tenant.isEmpty || $0.tenantID == tenant }.map(\.deviceID).sorted()
                #expect(ids(listed, "device_id") == Array(deviceScan.prefix(2)) && listed.jsonBody?["total"]?.numberValue == Double(deviceScan.count))
            }
        }
        #expect(h.server.state.approvals.values.contains { $0.state == .expired } && h.server.state.approvals.values.contains { $0.state == .resolved })
    }
}
