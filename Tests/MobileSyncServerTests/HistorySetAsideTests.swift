import Orch8Wire
import LabKernel
import Testing
@testable import MobileSyncServer
import ServerStorage

@Suite("Sync server: finished rows set aside into an archive")
struct HistorySetAsideTests {
    /// The same requests against a server that keeps every row in memory and one that sets
    /// finished rows aside in a SQLite archive: every answer and every change log must be
    /// the same, byte for byte.
    struct Pair {
        var plain: ServerHarness
        var archived: ServerHarness
        let archive: SQLiteSyncArchive
        var keys: [String: String] = [:]
        var answers = 0

        init() throws {
            plain = try ServerHarness()
            archived = try ServerHarness()
            archive = try SQLiteSyncArchive()
            archived.server.state.setAside(into: archive)
            for tenant in ["acme", "globex"] {
                keys[tenant] = send("POST", "/api/v1/mobile/tenants", ["tenant_id": .string(tenant)], key: plain.root).jsonBody?["api_key"]?.stringValue
            }
        }

        /// Sends to both; expects the same status, body and changes; returns the answer.
        @discardableResult
        mutating func send(_ method: String, _ target: String, _ body: JSONValue? = nil, key: String?, headers: [String: String] = [:],
                           sourceLocation: SourceLocation = #_sourceLocation) -> HTTPResponseMessage {
            var all = headers
            if let key { all["x-api-key"] = key }
            var bytes: [UInt8] = []
            body?.write(to: &bytes)
            let request = HTTPRequestMessage(method: method, target: target, headers: all, body: bytes)
            let a = plain.server.handle(request, now: plain.now), b = archived.server.handle(request, now: archived.now)
            #expect(a.response.status == b.response.status && a.response.body == b.response.body,
                    "\(method) \(target): \(a.response.text) against \(b.response.text)", sourceLocation: sourceLocation)
            #expect(a.changes == b.changes, "\(method) \(target): the change logs differ", sourceLocation: sourceLocation)
            answers += 1
            return a.response
        }

        @discardableResult
        mutating func sync(_ request: SyncRequest, tenant: String) -> SyncResponse? {
            let answer = send("POST", "/api/v1/mobile/sync", request.json, key: keys[tenant], headers: ["x-device-id": request.deviceID])
            return answer.jsonBody.flatMap { try? SyncResponse(json: $0) }
        }

        mutating func advance(_ span: TimeSpan) {
            plain.now = plain.now + span
            archived.now = archived.now + span
        }

        var timestamp: String { plain.timestamp }
    }

    static func status(_ instance: String, _ state: String, at time: String, step: String? = nil) -> StatusUpdate {
        StatusUpdate(instanceID: instance, sequenceName: "payment", state: state, currentStep: step, handler: nil, timestamp: time, steps: nil)
    }

    static func gate(_ instance: String, _ block: String, timeout: Int? = nil) -> ApprovalRequest {
        ApprovalRequest(instanceID: instance, blockID: block, sequenceName: "payment", prompt: "Approve?", choices: nil, storeAs: nil,
                        timeoutSeconds: timeout)
    }

    /// Every listing the API has, for both tenants, the root key, a device of each and a
    /// device of the other tenant, each state and a short and a long page.
    static func listEverything(_ pair: inout Pair) {
        for key in [pair.keys["acme"], pair.keys["globex"], pair.plain.root] {
            for device in ["", "&device_id=phone-0", "&device_id=phone-1"] {
                for limit in [2, 100] {
                    pair.send("GET", "/api/v1/mobile/status?limit=\(limit)\(device)", key: key)
                    for state in ["", "&state=pending", "&state=resolved", "&state=expired"] {
                        pair.send("GET", "/api/v1/mobile/approvals?limit=\(limit)\(state)\(device)", key: key)
                    }
                }
            }
        }
    }

    @Test("syncs, late and repeated reports, gates filed again, resolutions, expiry, acknowledgements, every listing and retention answer the same whether finished rows are in memory or set aside")
    func sameAnswers() throws {
        var pair = try Pair()
        for n in 0..<4 {
            pair.send("POST", "/api/v1/mobile/devices/register", ["device_id": .string("phone-\(n)"), "platform": "ios"],
                      key: pair.keys[n % 2 == 0 ? "acme" : "globex"])
        }
        var generator = SeededGenerator(seed: 21)
        var instances: [String] = []
        for round in 0..<120 {
            pair.advance(.seconds(Int64(generator.next(below: 90)) + 1))
            let device = Int(generator.next(below: 4))
            let tenant = device % 2 == 0 ? "acme" : "globex"
            let instance = ServerHarness.uuid(round)
            instances.append(instance)
            // A new instance with a gate; an older one moves on, finishes, or reports late.
            let older = instances[Int(generator.next(below: UInt64(instances.count)))]
            let state = ["Running", "Waiting", "Completed", "Failed", "Cancelled"][Int(generator.next(below: 5))]
            let late = generator.next(below: 6) == 0
            let time = RFC3339.format(unixMilliseconds: pair.plain.server.wallClock.unixMilliseconds(at: pair.plain.now) - (late ? 3_600_000 : 0))
            let request = SyncRequest(
                deviceID: "phone-\(device)",
                statusUpdates: [Self.status(instance, "Running", at: time, step: "start"), Self.status(older, state, at: time)],
                approvalRequests: [Self.gate(instance, "approve", timeout: generator.next(below: 3) == 0 ? 120 : nil),
                                   Self.gate(older, "approve")],  // filed again: found whether pending or closed
                commandAcks: [])
            let response = pair.sync(request, tenant: tenant)
            // The device acknowledges what it was sent, now and then twice.
            if let commands = response?.commands, !commands.isEmpty, generator.next(below: 3) != 0 {
                let acks = commands.map(\.id) + (generator.next(below: 4) == 0 ? commands.map(\.id) : [])
                pair.sync(SyncRequest(deviceID: "phone-\(device)", commandAcks: acks), tenant: tenant)
            }
            // An operator resolves the oldest pending approval now and then, or one already closed.
            if generator.next(below: 3) == 0 {
                let pending = pair.plain.server.state.approvals.values.filter { $0.state == .pending }.min { $0.orderKey < $1.orderKey }
                let closed = pair.archive.oldestApprovals(1, tenant: nil, state: nil).first
                if let id = (generator.next(below: 4) == 0 ? closed?.id : nil) ?? pending?.id {
                    pair.send("POST", "/api/v1/mobile/approvals/\(id)/resolve", ["output": ["value": "yes"]], key: pair.plain.root)
                }
            }
            if round % 40 == 39 { Self.listEverything(&pair) }
        }
        let counts = pair.archive.counts
        #expect(counts.statuses > 20 && counts.approvals > 20 && counts.commands > 10, "rows were set aside: \(counts)")
        #expect(pair.archived.server.state.approvals.values.allSatisfy { $0.state == .pending })
        #expect(pair.archived.server.state.commands.values.allSatisfy { $0.ackedAtMs == nil })
        #expect(pair.archived.server.state.statuses.values.allSatisfy { $0.values.allSatisfy { !$0.isFinal } })

        // A finished instance reported running again comes back to memory, and finishes again.
        let finished = try #require(pair.archive.newestStatuses(1, tenant: "acme").first)
        let later = RFC3339.format(unixMilliseconds: finished.reportedAtMs + 1_000)
        pair.sync(SyncRequest(deviceID: finished.deviceID, statusUpdates: [Self.status(finished.instanceID, "Running", at: later)]), tenant: "acme")
        #expect(pair.archived.server.state.statuses[finished.deviceID]?[finished.instanceID] != nil)
        #expect(pair.archive.status(device: finished.deviceID, instance: finished.instanceID) == nil, "one row an instance")
        Self.listEverything(&pair)

        // Retention: a week on, acknowledged commands go; a month on, closed approvals.
        pair.advance(.days(8))
        pair.send("GET", "/api/v1/mobile/devices", key: pair.keys["acme"])
        #expect(pair.archive.counts.commands == 0)
        pair.advance(.days(23))
        pair.send("GET", "/api/v1/mobile/devices", key: pair.keys["acme"])
        #expect(pair.archive.counts.approvals == 0)
        Self.listEverything(&pair)
        #expect(pair.answers > 600)
    }
}
