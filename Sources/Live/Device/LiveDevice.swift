public import DeviceWorkflows
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LabKernel

/// A real device core on real sockets: an `EngineHost` with sync on, its store on disk,
/// talking HTTP to a served mobile sync server. Time is `LiveClock`'s: instants are the
/// wall clock since the Unix epoch, so what the store keeps (deadlines, creation times)
/// means the same after a relaunch; the host's wall clock must be `.unixEpoch`.
/// `step()` advances the engine to now and ticks it.
public final class LiveDevice<Store: WorkflowStore>: @unchecked Sendable {
    public var host: EngineHost<Store>
    public let baseURL: String
    public let apiKey: String
    public let deviceID: String
    let clock = LiveClock()
    /// Ticks run so far (the reporter counts its interval in these).
    public private(set) var ticks: UInt64 = 0

    public init(host: EngineHost<Store>, baseURL: String, apiKey: String, deviceID: String, seed: UInt64 = 1) {
        self.host = host
        self.baseURL = baseURL
        self.apiKey = apiKey
        self.deviceID = deviceID
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

    public struct HTTPFailure: Error, CustomStringConvertible {
        public var status: Int
        public var body: String
        public var description: String { "HTTP \(status): \(body)" }
    }

    /// `POST /api/v1/mobile/devices/register`.
    public func register(platform: String = "ios", pushToken: String? = nil, appVersion: String = "1.0") throws {
        var body: [String: JSONValue] = ["device_id": .string(deviceID), "platform": .string(platform), "app_version": .string(appVersion)]
        if let pushToken { body["push_token"] = .string(pushToken) }
        let reply = try Self.fetch(method: "POST", url: baseURL + "/api/v1/mobile/devices/register", headers: headers, body: JSONValue.object(body))
        guard reply.status == 201 else { throw HTTPFailure(status: reply.status, body: String(decoding: reply.body, as: UTF8.self)) }
    }

    var headers: [String: String] { ["x-api-key": apiKey, "x-device-id": deviceID, "content-type": "application/json"] }

    /// One sync now: the outbox goes up, commands come down and are applied. A network
    /// error, 429 or 5xx backs off (Retry-After honoured) and loses nothing. Returns nil
    /// when the request failed.
    @discardableResult
    public func syncNow() throws -> CommandReport? {
        host.advance(to: wallNow)
        let (request, sent) = try host.makeSyncRequest()
        host.sync?.began()
        let reply: (status: Int, headers: [String: String], body: [UInt8])
        do {
            reply = try Self.fetch(method: "POST", url: baseURL + "/api/v1/mobile/sync", headers: headers, body: request.json)
        } catch {
            host.syncFailed()
            return nil
        }
        guard (200..<300).contains(reply.status), let json = try? JSONValue.parse(bytes: reply.body),
              let response = try? SyncResponse(json: json) else {
            let retryAfter = reply.headers["retry-after"].flatMap(Int64.init).map { TimeSpan.seconds($0) }
            host.syncFailed(retryAfter: retryAfter)
            return nil
        }
        return try host.syncSucceeded(sent, response: response, tick: ticks)
    }

    /// The SDK's `sync(manifestUrl, tokenProvider)` over HTTP.
    public func syncManifest(tenant: String) throws -> ManifestSyncResult {
        try host.syncManifest(url: baseURL + "/\(tenant)/manifest.json", token: apiKey) { fetch in
            let reply = try Self.fetch(method: "GET", url: fetch.url, headers: fetch.headers, body: nil)
            return ManifestFetchReply(status: reply.status, headers: reply.headers, body: reply.body)
        }
    }

    /// A blocking HTTP exchange (URLSession on its own queue; the device core is synchronous).
    static func fetch(method: String, url: String, headers: [String: String], body: JSONValue?,
                      timeout: TimeInterval = 10) throws -> (status: Int, headers: [String: String], body: [UInt8]) {
        guard let target = URL(string: url) else { throw HTTPFailure(status: 0, body: "bad URL \(url)") }
        var request = URLRequest(url: target)
        request.httpMethod = method
        request.timeoutInterval = timeout
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        if let body { request.httpBody = Data(body.canonicalText.utf8) }
        let done = DispatchSemaphore(value: 0)
        let box = ReplyBox()
        URLSession.shared.dataTask(with: request) { data, response, error in
            box.set(data: data, response: response as? HTTPURLResponse, error: error)
            done.signal()
        }.resume()
        done.wait()
        if let error = box.error { throw error }
        guard let http = box.response else { throw HTTPFailure(status: 0, body: "no response") }
        var fields: [String: String] = [:]
        for (name, value) in http.allHeaderFields { fields[String(describing: name).lowercased()] = String(describing: value) }
        return (http.statusCode, fields, [UInt8](box.data ?? Data()))
    }
}

final class ReplyBox: @unchecked Sendable {
    private let lock = NSLock()
    private(set) var data: Data?
    private(set) var response: HTTPURLResponse?
    private(set) var error: (any Error)?

    func set(data: Data?, response: HTTPURLResponse?, error: (any Error)?) {
        lock.withLock {
            self.data = data
            self.response = response
            self.error = error
        }
    }
}
