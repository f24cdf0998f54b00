public import DeviceWorkflows
public import WorkflowHost
public import Orch8Wire
public import LabKernel
import Synchronization

/// A real device core on real sockets: an `EngineHost` with sync on, its store on disk,
/// talking HTTP (`HTTPClient`, a deadline on every exchange) to an orch8 sync server.
/// Time is `LiveClock`'s: instants are the wall clock since the Unix epoch, so what the
/// store keeps (deadlines, creation times) means the same after a relaunch; the host's
/// wall clock must be `.unixEpoch`. `step()` advances the engine to now and ticks it.
///
/// One owner drives it (a test, `fleetlab device`): its methods are not for concurrent
/// use. Push wakes arrive on the channel's thread and wait in an inbox for `takeWakes`.
public final class LiveDevice<Store: WorkflowStore>: @unchecked Sendable {
    public var host: EngineHost<Store>
    public let baseURL: String
    public let apiKey: String
    public let deviceID: String
    /// What every request to the server carries.
    let headers: [String: String]
    let clock = LiveClock()
    let http: HTTPClient
    /// Where this device's requests to its server go.
    let transport: any HTTPTransport
    /// How long one exchange with the server may take.
    public var requestTimeout: Duration = .seconds(10)
    /// Ticks run so far (the reporter counts its interval in these).
    public private(set) var ticks: UInt64 = 0
    let wakes = WakeInbox()
    var pushChannel: PushChannelClient?
    /// Telemetry events the server accepted.
    public private(set) var telemetrySent = 0
    /// What the last sync request carried.
    public private(set) var lastSent = SentCounts()
    /// Why the last sync exchange failed (`ExchangeFailure`: a non-2xx status or no
    /// answer); nil when it was answered 2xx.
    public private(set) var lastSyncFailure: String?

    public struct SentCounts: Equatable, Sendable {
        public var statuses = 0, approvals = 0, delegations = 0, acks = 0
    }

    /// `transport` defaults to HTTP to `baseURL`; a test passes a server core in process.
    public init(host: EngineHost<Store>, baseURL: String, apiKey: String, deviceID: String, seed: UInt64 = 1,
                http: HTTPClient = HTTPClient(), transport: (any HTTPTransport)? = nil) {
        precondition(host.wallClock == .unixEpoch, "a live device's instants are wall-clock time since the Unix epoch")
        self.host = host
        self.baseURL = baseURL
        self.apiKey = apiKey
        self.deviceID = deviceID
        headers = ["x-api-key": apiKey, "x-device-id": deviceID, "content-type": "application/json"]
        self.http = http
        self.transport = transport ?? http.transport(to: baseURL)
        self.host.enableSync(deviceID: deviceID, seed: StreamSeed(seed))
        self.host.advance(to: clock.now)
    }

    var wallNow: Instant { clock.now }

    /// Advances the engine to the wall clock and runs what is due.
    public func step() throws {
        host.advance(to: wallNow)
        try host.runUntilIdle(limit: .zero)
        ticks += 1
    }

    public struct HTTPFailure: HTTPStatusFailure, CustomStringConvertible {
        public var status: Int
        public var body: String
        public var description: String { "HTTP \(status): \(body)" }
    }

    func exchange(_ method: String, _ path: String, body: JSONValue? = nil, extra: [String: String] = [:]) async throws -> HTTPResponseMessage {
        var bytes: [UInt8] = []
        body?.write(to: &bytes)
        let request = HTTPRequestMessage(method: method, target: path, headers: extra.isEmpty ? headers : headers.merging(extra) { $1 }, body: bytes)
        return try await transport.send(request, timeout: requestTimeout)
    }

    /// `POST /api/v1/mobile/devices/register` (the app version from the device context
    /// when one is set).
    public func register(platform: String = "ios", pushToken: String? = nil, appVersion: String = "1.0") async throws {
        let version = host.engine.deviceContext.map(\.appVersion).flatMap { $0.isEmpty ? nil : $0 } ?? appVersion
        var body: [String: JSONValue] = ["device_id": .string(deviceID), "platform": .string(platform), "app_version": .string(version)]
        if let pushToken { body["push_token"] = .string(pushToken) }
        let reply = try await exchange("POST", "/api/v1/mobile/devices/register", body: .object(body))
        guard reply.status == 201 else { throw HTTPFailure(status: reply.status, body: String(decoding: reply.body, as: UTF8.self)) }
    }

    /// One sync now: the outbox goes up, commands come down and are applied, then the
    /// recorded telemetry goes up. A network error, timeout, 429 or 5xx backs off
    /// (Retry-After honoured) and loses nothing. Returns nil when the request failed.
    @discardableResult
    public func syncNow() async throws -> CommandReport? {
        host.advance(to: wallNow)
        return try await exchange(try host.sync(.syncRequested).send)
    }

    /// Syncs when the client says one is due (its interval, a push, a backoff that
    /// ended); nil when none was due or the request failed.
    public func syncIfDue() async throws -> CommandReport? {
        if case .synced(let report) = try await syncWhenDue() { return report }
        return nil
    }

    /// What a tick's sync came to: none was due, the request failed, or it went through.
    public enum SyncAttempt: Sendable {
        case notDue
        case failed
        case synced(CommandReport)
    }

    /// `syncIfDue`, telling a sync that was not due from one that failed (a load test
    /// counts requests, not ticks).
    public func syncWhenDue() async throws -> SyncAttempt {
        host.advance(to: wallNow)
        guard let request = try host.sync(.ticked(ticks)).send else { return .notDue }
        return try await exchange(request).map(SyncAttempt.synced) ?? .failed
    }

    /// Sends `request` (if any) and settles its answer.
    func exchange(_ request: SyncRequest?) async throws -> CommandReport? {
        guard let request else { return nil }
        lastSent = SentCounts(statuses: request.statusUpdates.count, approvals: request.approvalRequests.count,
                              delegations: request.stepDelegations.count, acks: request.commandAcks.count)
        let answer: SyncAnswer
        do {
            let reply = try await exchange("POST", "/api/v1/mobile/sync", body: request.json)
            answer = SyncAnswer(status: reply.status, retryAfter: reply.header("retry-after"), body: reply.body)
            lastSyncFailure = (200..<300).contains(reply.status) ? nil : ExchangeFailure.reason(status: reply.status)
        } catch {
            answer = .unreachable
            lastSyncFailure = ExchangeFailure.reason(error)
        }
        host.advance(to: wallNow)
        guard let report = try host.sync(.answered(answer, tick: ticks)).report else { return nil }
        try await flushTelemetry()
        return report
    }

    /// `flushTelemetry()`: sends what the engine recorded, in batches of up to 500, to
    /// `POST /api/v1/telemetry/mobile`; a failed request keeps the events for next time.
    /// Also runs after every successful sync (the reporter's cadence).
    @discardableResult
    public func flushTelemetry() async throws -> Int {
        var sent = 0
        while let batch = try host.makeTelemetryBatch() {
            guard let reply = try? await exchange("POST", "/api/v1/telemetry/mobile", body: batch.body),
                  (200..<300).contains(reply.status) else { break }
            try host.telemetryDelivered(batch)
            sent += batch.count
        }
        telemetrySent += sent
        return sent
    }

    /// The SDK's `sync(manifestUrl, tokenProvider)` over HTTP: the manifest of `tenant`
    /// ("_" for the root key's) and the files it names.
    public func syncManifest(tenant: String) async throws -> ManifestSyncResult {
        let url = baseURL + "/\(tenant)/manifest.json"
        let first = host.manifestRequest(url: url, token: apiKey)
        var replies = try await prefetch([first])
        if let manifest = replies[url] {
            replies.merge(try await prefetch(host.manifestDownloads(after: manifest, token: apiKey))) { old, _ in old }
        }
        return try host.syncManifest(url: url, token: apiKey) { fetch in
            guard let reply = replies[fetch.url] else { throw HTTPFailure(status: 0, body: "not fetched: \(fetch.url)") }
            return reply
        }
    }

    /// The SDK's `loadSequencesFromUrl(url)` over HTTP ("" is `config.sequencesUrl`).
    public func loadSequences(fromURL url: String) async throws -> SequenceListLoad {
        let target = url.isEmpty ? host.engine.config.sequencesUrl : url
        let replies = try await prefetch([ManifestFetch(url: target, headers: [:])])
        return try host.loadSequences(fromURL: url) { fetch in
            guard let reply = replies[fetch.url] else { throw HTTPFailure(status: 0, body: "not fetched: \(fetch.url)") }
            return reply
        }
    }

    /// GETs each absolute URL (on this device's server or another), keyed by URL.
    func prefetch(_ fetches: [ManifestFetch]) async throws -> [String: ManifestFetchReply] {
        var replies: [String: ManifestFetchReply] = [:]
        for fetch in fetches where replies[fetch.url] == nil {
            guard let split = Self.splitURL(fetch.url) else { continue }
            let request = HTTPRequestMessage(method: "GET", target: split.target, headers: headers.merging(fetch.headers) { $1 })
            // This device's server through its transport; any other over HTTP.
            let reply = split.base == baseURL ? try await transport.send(request, timeout: requestTimeout)
                : try await http.send(request, to: split.base, timeout: requestTimeout)
            replies[fetch.url] = ManifestFetchReply(status: reply.status, headers: Dictionary(reply.headers.map { ($0.name, $0.value) },
                                                                                            uniquingKeysWith: { $1 }), body: reply.body)
        }
        return replies
    }

    /// `http://host:port/path?query` as its base and target.
    static func splitURL(_ url: String) -> (base: String, target: String)? {
        guard url.hasPrefix("http://") else { return nil }
        let rest = url.dropFirst("http://".count)
        guard let slash = rest.firstIndex(of: "/") else { return (url, "/") }
        return ("http://" + rest[..<slash], String(rest[slash...]))
    }

    // MARK: Push

    /// Subscribes to the server's development push channel: each wake is kept for
    /// `takeWakes`, and the reporter syncs on the next step (`onPushReceived()`).
    public func subscribeToPush(onEnd: @escaping @Sendable (String) -> Void = { _ in }) async throws {
        pushChannel?.close()
        let wakes = self.wakes
        pushChannel = try await PushChannelClient.connect(baseURL: baseURL, deviceID: deviceID, apiKey: apiKey, tls: http.tls, proxies: http.proxies,
                                                          onWake: { wake in wakes.list.withLock { $0.append(wake) } }, onEnd: onEnd)
    }

    public func unsubscribeFromPush() {
        pushChannel?.close()
        pushChannel = nil
    }

    /// The wakes received since the last call; each forces the next sync.
    public func takeWakes() -> [JSONValue] {
        let taken = wakes.list.withLock { list -> [JSONValue] in
            defer { list.removeAll() }
            return list
        }
        if !taken.isEmpty { host.pushReceived() }
        return taken
    }
}

final class WakeInbox: Sendable {
    let list = Mutex<[JSONValue]>([])
}

extension LiveDevice where Store == SQLiteWorkflowStore {
    /// A device whose state lives in `storePath`: a new one, or the one a previous run
    /// left there, restored (instances, outbox, executed commands) as an app relaunch
    /// would. Instants are wall-clock time since the Unix epoch.
    public static func open(baseURL: String, apiKey: String, deviceID: String, storePath: String, config: MobileEngineConfig,
                            seed: UInt64, http: HTTPClient = HTTPClient()) throws -> LiveDevice {
        let wall = WallClockOrigin.unixEpoch
        let store = try SQLiteWorkflowStore(path: storePath)
        let now = LiveClock().now
        var host: EngineHost<SQLiteWorkflowStore>
        let stored = try store.loadState()
        if !stored.instances.isEmpty || !stored.sequences.isEmpty {
            host = try EngineHost.relaunch(config: config, store: store, seed: StreamSeed(seed), now: now, wallClock: wall)
        } else {
            let engine = MobileEngine(config: config, handlers: BuiltinHandlers.names, seed: StreamSeed(seed), wallClock: wall)
            host = EngineHost(engine: engine, store: store, wallClock: wall, now: now)
        }
        host.engine.resume()
        return LiveDevice(host: host, baseURL: baseURL, apiKey: apiKey, deviceID: deviceID, seed: seed, http: http)
    }
}
