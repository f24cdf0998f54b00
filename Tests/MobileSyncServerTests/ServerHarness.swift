import DeviceWorkflows
import Orch8Wire
import Foundation
import LabCrypto
import LabKernel
import LabStore
import LabTestSupport
@testable import MobileSyncServer
import ServerStorage

/// A sync server with a clock, request helpers, and optionally a SQLite store that every
/// reply's changes are committed to (as the live driver does).
struct ServerHarness {
    var server: SyncServer
    var now: Instant = .zero
    var root: String
    var store: SQLiteSyncServerStore?
    var pushes: [PushWake] = []

    init(authRequired: Bool = true, sqlite: Bool = false, sealingKey: SecretKey32? = nil) throws {
        server = SyncServer(config: SyncServerConfig(authRequired: authRequired, baseURL: "http://127.0.0.1:7710"),
                            seed: StreamSeed(99), wallClock: .simulationEpoch)
        root = server.bootstrap(now: .zero)
        if sqlite {
            let path = TestPaths.scratchDirectory("sync-server").appendingPathComponent("server.sqlite").path
            store = try SQLiteSyncServerStore(path: path, sealingKey: sealingKey)
            try store?.apply(server.state.takeChanges())
        } else {
            _ = server.state.takeChanges()
        }
    }

    @discardableResult
    mutating func send(_ method: String, _ target: String, _ body: JSONValue? = nil, key: String? = nil,
                       headers: [String: String] = [:]) throws -> HTTPResponseMessage {
        var all = headers
        if let key { all["x-api-key"] = key }
        var bytes: [UInt8] = []
        body?.write(to: &bytes)
        let reply = server.handle(HTTPRequestMessage(method: method, target: target, headers: all, body: bytes), now: now)
        try store?.apply(reply.changes)
        pushes += reply.pushes
        return reply.response
    }

    mutating func raw(_ method: String, _ target: String, body: String, key: String?) -> HTTPResponseMessage {
        var headers: [String: String] = [:]
        if let key { headers["x-api-key"] = key }
        return server.handle(HTTPRequestMessage(method: method, target: target, headers: headers, body: Array(body.utf8)), now: now).response
    }

    /// Creates a tenant and returns its key.
    mutating func tenant(_ id: String) throws -> String {
        let r = try send("POST", "/api/v1/mobile/tenants", ["tenant_id": .string(id)], key: root)
        return r.jsonBody?["api_key"]?.stringValue ?? ""
    }

    mutating func register(_ device: String, key: String, push: String? = nil) throws -> HTTPResponseMessage {
        var body: [String: JSONValue] = ["device_id": .string(device), "platform": "ios", "app_version": "1.0"]
        if let push { body["push_token"] = .string(push) }
        return try send("POST", "/api/v1/mobile/devices/register", .object(body), key: key)
    }

    mutating func sync(_ request: SyncRequest, key: String) throws -> (HTTPResponseMessage, SyncResponse?) {
        let r = try send("POST", "/api/v1/mobile/sync", request.json, key: key, headers: ["x-device-id": request.deviceID])
        return (r, r.jsonBody.flatMap { try? SyncResponse(json: $0) })
    }

    var timestamp: String { server.wallClock.rfc3339(at: now) }

    static func uuid(_ n: Int) -> String { String(format: "00000000-0000-4000-8000-%012d", n) }
}

extension HTTPResponseMessage {
    var errorText: String { jsonBody?["error"]?.stringValue ?? "" }
    var text: String { String(decoding: body, as: UTF8.self) }
}
