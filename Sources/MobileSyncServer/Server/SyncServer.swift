public import Orch8Wire
public import LabKernel
import LabCrypto

/// The orch8 mobile sync server (wire-notes §a) as a sans-I/O core.
///
/// Theory of operation. A driver decodes an HTTP request into an `HTTPRequestMessage` and
/// calls `handle(_:now:)`; the server authenticates the caller, routes the request, reads
/// and writes its `SyncServerState`, and returns the response together with the rows it
/// wrote (`changes`, for the driver to commit before answering) and the push wakes to
/// send. It never reads a clock or touches a socket; ids come from its seeded stream.
///
/// Routes live both under `/api/v1/` (canonical) and bare (`/mobile/...`, deprecated: the
/// response carries `Deprecation`, `Sunset` and `Link` headers, as the real server does).
/// Errors are `{"error": "<kind>: <message>"}` with 400 (invalid argument), 401, 403,
/// 404 (not found, also for another tenant's rows), 405, 409 (conflict) or 413.
public struct SyncServer: Sendable {
    public var state: SyncServerState
    public var config: SyncServerConfig
    public let wallClock: WallClockOrigin
    var generator: SeededGenerator

    public init(state: SyncServerState = SyncServerState(), config: SyncServerConfig = SyncServerConfig(), seed: StreamSeed,
                wallClock: WallClockOrigin) {
        self.state = state
        self.config = config
        self.wallClock = wallClock
        self.generator = seed.generator()
    }

    public static let rootKeyMeta = "root_api_key"
    public static let manifestRootSeedMeta = "manifest_root_seed"

    /// Creates what a fresh server needs (the root API key, the manifest root key and a
    /// first signing key) unless the state has them; returns the root API key.
    @discardableResult
    public mutating func bootstrap(now: Instant) -> String {
        if state.meta[Self.rootKeyMeta] == nil {
            state.setMeta(Self.rootKeyMeta, "fl_root_" + randomToken(24))
        }
        if state.meta[Self.manifestRootSeedMeta] == nil {
            state.setMeta(Self.manifestRootSeedMeta, randomBytes(32).hexString)
        }
        if state.manifest.signingKeys.values.allSatisfy(\.revoked) { _ = rotateSigningKey(now: now) }
        return state.meta[Self.rootKeyMeta]!
    }

    public var rootAPIKey: String? { state.meta[Self.rootKeyMeta] }

    /// Handles one request. The returned changes must be committed before the response is
    /// sent; the pushes sent after.
    public mutating func handle(_ request: HTTPRequestMessage, now: Instant) -> SyncServerReply {
        _ = state.takeChanges()
        pruneIfDue(now: now)
        var pushes: [PushWake] = []
        var response: HTTPResponseMessage
        var path = request.segments
        var deprecated = false
        if path.count >= 2 && path[0] == "api" && path[1] == "v1" {
            path.removeFirst(2)
        } else if path.first == "mobile" {
            deprecated = true
        }
        do {
            response = try route(request, path: path, now: now, pushes: &pushes)
        } catch let error as APIError {
            response = error.response
        } catch {
            response = .json(500, ["error": "internal server error"])
        }
        if deprecated {
            response.headers += [
                HTTPHeader("Deprecation", "true"),
                HTTPHeader("Sunset", "Wed, 01 Jul 2026 00:00:00 GMT"),
                HTTPHeader("Link", "</api/v1\(request.path)>; rel=\"successor-version\""),
            ]
        }
        return SyncServerReply(response: response, changes: state.takeChanges(), pushes: pushes)
    }

    mutating func route(_ request: HTTPRequestMessage, path: [String], now: Instant, pushes: inout [PushWake]) throws -> HTTPResponseMessage {
        let method = request.method
        // Public: the manifest and sequences a device fetches (`/{tenant}/manifest.json`).
        if path.count == 2, path[1] == "manifest.json" {
            try expect(method, "GET", request)
            return try serveManifest(tenant: path[0], request: request, now: now)
        }
        if path.count == 2, path[1] == "sequences.json" {
            try expect(method, "GET", request)
            return try serveSequenceList(tenant: path[0], request: request, now: now)
        }
        if path.count == 3, path[1] == "sequences" {
            try expect(method, "GET", request)
            return try serveSequenceFile(tenant: path[0], file: path[2], request: request, now: now)
        }
        if let page = try routeDashboard(request, path: path, now: now) { return page }
        let caller = try authenticate(request, now: now)
        // Every route validates the whole request before its first write, so a refused
        // request changes nothing (and there is no copy of the state to roll back to:
        // copying it per request would cost as much as the state is large).
        return try routeAuthenticated(request, path: path, caller: caller, now: now, pushes: &pushes)
    }

    mutating func routeAuthenticated(_ request: HTTPRequestMessage, path: [String], caller: Caller, now: Instant,
                            pushes: inout [PushWake]) throws -> HTTPResponseMessage {
        let method = request.method
        switch path.first {
        case "mobile":
            let rest = Array(path.dropFirst())
            switch rest {
            case ["sync"]:
                try expect(method, "POST", request)
                return try sync(request, caller: caller, now: now)
            case ["devices", "register"]:
                try expect(method, "POST", request)
                return try registerDevice(request, caller: caller, now: now)
            case ["devices"]:
                try expect(method, "GET", request)
                return try listDevices(request, caller: caller)
            case ["approvals"]:
                try expect(method, "GET", request)
                return try listApprovals(request, caller: caller, now: now)
            case ["status"]:
                try expect(method, "GET", request)
                return try listStatuses(request, caller: caller)
            case ["commands"]:
                try expect(method, "POST", request)
                return try createCommand(request, caller: caller, now: now, pushes: &pushes)
            case ["tenants"]:
                if method == "GET" { return try listTenants(caller: caller) }
                try expect(method, "POST", request)
                return try createTenant(request, caller: caller, now: now)
            case ["manifest", "sequences"]:
                try expect(method, "POST", request)
                return try publishSequence(request, caller: caller, now: now)
            case ["manifest", "keys"]:
                if method == "GET" { return listSigningKeys(caller: caller) }
                try expect(method, "POST", request)
                return try rotateKey(caller: caller, now: now)
            case ["manifest", "root-key"]:
                try expect(method, "GET", request)
                return rootKey()
            case ["push", "stream"]:
                try expect(method, "GET", request)
                return try openPushStream(request, caller: caller)
            default:
                if rest.count == 3, rest[0] == "devices", rest[2] == "telemetry" {
                    try expect(method, "GET", request)
                    return try listTelemetry(device: rest[1], request, caller: caller)
                }
                if rest.count == 3, rest[0] == "approvals", rest[2] == "resolve" {
                    try expect(method, "POST", request)
                    return try resolveApproval(id: rest[1], request, caller: caller, now: now, pushes: &pushes)
                }
                if rest.count == 3, rest[0] == "manifest", rest[1] == "sequences" {
                    try expect(method, "DELETE", request)
                    return try removeSequence(name: rest[2], caller: caller, now: now)
                }
                if rest.count == 3, rest[0] == "manifest", rest[1] == "keys" {
                    try expect(method, "DELETE", request)
                    return try revokeKey(id: rest[2], caller: caller, now: now)
                }
            }
        case "credentials":
            if path.count == 1 {
                if method == "GET" { return listCredentials(caller: caller) }
                try expect(method, "POST", request)
                return try createCredential(request, caller: caller, now: now)
            }
            if path.count == 2 {
                try expect(method, "PATCH", request)
                return try updateCredential(id: path[1], request, caller: caller)
            }
        case "telemetry":
            if path == ["telemetry", "mobile"] {
                try expect(method, "POST", request)
                return try ingestTelemetry(request, caller: caller, now: now)
            }
            if path == ["telemetry", "mobile", "errors"] {
                try expect(method, "POST", request)
                return try ingestErrorReport(request, caller: caller, now: now)
            }
        default:
            break
        }
        throw APIError(404, "not found", "no route for \(method) \(request.path)")
    }

    func expect(_ method: String, _ allowed: String, _ request: HTTPRequestMessage) throws {
        guard method == allowed else { throw APIError(405, "method not allowed", "\(request.path) accepts \(allowed), not \(method)") }
    }

    // MARK: Helpers shared by the routes

    func body(_ request: HTTPRequestMessage) throws -> JSONValue {
        guard !request.body.isEmpty else { throw APIError(400, "invalid argument", "the body is empty; a JSON object is expected") }
        do {
            return try JSONValue.parse(bytes: request.body)
        } catch {
            throw APIError(400, "invalid argument", "the body is not valid JSON (\(error))")
        }
    }

    func fields(_ request: HTTPRequestMessage) throws -> JSONFields {
        do { return try JSONFields(try body(request)) } catch { throw APIError.from(error) }
    }

    func timestamp(_ now: Instant) -> String { wallClock.rfc3339(at: now) }
    func unixMs(_ now: Instant) -> Int64 { wallClock.unixMilliseconds(at: now) }

    mutating func newID() -> String { UUIDText.random(using: &generator) }

    mutating func randomBytes(_ count: Int) -> [UInt8] { generator.bytes(count) }

    mutating func randomToken(_ bytes: Int) -> String { generator.token(bytes) }

    func limit(_ request: HTTPRequestMessage, default value: Int = 100, max: Int = 500) throws -> Int {
        guard let text = request.query["limit"] else { return value }
        guard let n = Int(text), n >= 1 else { throw APIError(400, "invalid argument", "limit must be a positive integer, got '\(text)'") }
        return min(n, max)
    }
}

/// What `handle` returns.
public struct SyncServerReply: Sendable {
    public var response: HTTPResponseMessage
    /// Rows to commit before the response is sent.
    public var changes: [StoreChange]
    /// Silent pushes to send once committed.
    public var pushes: [PushWake]
}

/// What a typed sync returns.
public struct SyncOutcome: Sendable {
    public var response: SyncResponse
    /// Approvals this sync created (an operator model watches for them).
    public var newApprovals: [ApprovalRecord]
    public var changes: [StoreChange]
}

/// A request the server refused, as status and message.
public struct SyncServerRefusal: Error, Equatable, Sendable {
    public var status: Int
    public var message: String

    public init(status: Int, message: String) {
        self.status = status
        self.message = message
    }
}

/// A silent push that makes a device sync now (APNs `content-available`, FCM data).
public struct PushWake: Equatable, Sendable {
    public var deviceID: String
    public var pushToken: String
    public var commandID: String
    /// `SignedWakeMetadata`, the `orch8` field of the push body.
    public var metadata: JSONValue
}

public struct SyncServerConfig: Sendable, Equatable {
    /// Off: no key is needed and ownership checks fall open (`fleetlab serve --no-auth`).
    public var authRequired = true
    /// Where devices reach this server; sequence URLs in manifests are absolute.
    public var baseURL = "http://127.0.0.1:7710"
    /// Sync interval hints (seconds).
    public var activeIntervalSecs = 5
    public var idleIntervalSecs = 30
    /// Commands per sync response.
    public var commandBatch = 50
    /// How long what is done is kept (docs/sync.md, "Retention").
    public var retention = SyncRetention()
    /// Off (the simulator): a status's context summary and step list are not kept, and the
    /// API lists them as null. Nothing in a simulation reads them back, and at a day of a
    /// large fleet they were a quarter of the simulator's memory (1.7 KB of step list per
    /// instance, timestamps in every step). The live server keeps them, as orch8 does.
    public var keepsStatusTexts = true

    public init(authRequired: Bool = true, baseURL: String = "http://127.0.0.1:7710") {
        self.authRequired = authRequired
        self.baseURL = baseURL
    }
}

/// An error a route answers with.
struct APIError: Error {
    var status: Int
    var kind: String
    var message: String

    init(_ status: Int, _ kind: String, _ message: String) {
        self.status = status
        self.kind = kind
        self.message = message
    }

    init(field: JSONFieldError) {
        self.init(400, "invalid argument", field.description)
    }

    var response: HTTPResponseMessage { .error(status, kind, message) }

    /// A field error as a 400; an APIError as itself.
    static func from(_ error: any Error) -> APIError {
        if let api = error as? APIError { return api }
        if let field = error as? JSONFieldError { return APIError(field: field) }
        return APIError(400, "invalid argument", "\(error)")
    }
}
