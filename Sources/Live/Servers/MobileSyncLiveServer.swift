import Foundation
public import Hummingbird
public import LabKernel
import LabStore
public import MobileSyncServer
import NIOCore
public import ServiceLifecycle

/// The orch8 mobile sync server on a real port: the `SyncServer` core behind Hummingbird,
/// its state in `<data>/mobile-sync.sqlite`.
///
/// Requests run one at a time through the core (under a lock); the rows a request wrote
/// are committed to SQLite before its response is sent, so an answered request is never
/// lost in a crash. Pushes are logged (no APNs or FCM credentials here); devices that
/// poll, or the simulator, see the commands.
public final class MobileSyncLiveServer: ReferenceServer, @unchecked Sendable {
    public let name = "mobile-sync"
    public let defaultPort: Int
    public let summary = "orch8 mobile sync: /api/v1/mobile/*, /credentials, /telemetry/mobile, /dashboard/mobile-sync"
    let lock = NSLock()
    var server: SyncServer
    let store: SQLiteSyncServerStore
    let clock = LiveClock()
    public private(set) var pushLog: [PushWake] = []

    /// Opens (or creates) the database under `dataDirectory` and readies the server: a
    /// fresh one gets its root API key and manifest keys here.
    public init(dataDirectory: String, defaultPort: Int = 7710, authRequired: Bool = true, seed: UInt64? = nil) throws {
        self.defaultPort = defaultPort
        try FileManager.default.createDirectory(atPath: dataDirectory, withIntermediateDirectories: true)
        store = try SQLiteSyncServerStore(path: (dataDirectory as NSString).appendingPathComponent("mobile-sync.sqlite"))
        let ids = seed ?? UInt64.random(in: 1...UInt64.max)
        server = SyncServer(state: try store.load(), config: SyncServerConfig(authRequired: authRequired), seed: StreamSeed(ids),
                            wallClock: clock.origin)
        server.bootstrap(now: clock.now)
        try store.apply(server.state.takeChanges())
    }

    public var details: [String] {
        authRequired ? ["root API key: \(rootAPIKey)  (x-api-key header; POST /api/v1/mobile/tenants makes tenant keys)",
                        "dashboard: /dashboard/mobile-sync?key=<API key>"]
            : ["no auth (--no-auth): every request is accepted, tenants fall open"]
    }

    /// The root API key (printed by `fleetlab serve`).
    public var rootAPIKey: String { lock.withLock { server.rootAPIKey ?? "" } }
    public var authRequired: Bool { lock.withLock { server.config.authRequired } }

    var now: Instant { clock.now }

    /// Runs one request through the core and commits its rows.
    public func handle(_ request: HTTPRequestMessage) throws -> HTTPResponseMessage {
        try lock.withLock {
            let reply = server.handle(request, now: now)
            do {
                try store.apply(reply.changes)
            } catch {
                // The rows did not reach the disk: reload what did, and fail the request.
                server.state = (try? store.load()) ?? server.state
                throw error
            }
            pushLog += reply.pushes
            return reply.response
        }
    }

    public func makeService(configuration: ApplicationConfiguration,
                            onRunning: @escaping @Sendable (any Channel) async -> Void) throws -> any Service {
        let responder = CoreResponder { [self] request in try self.handle(request) }
        return Application(responder: responder, configuration: configuration) { [self] channel in
            if let port = channel.localAddress?.port {
                let bound = channel.localAddress?.ipAddress ?? "127.0.0.1"
                let host = bound == "0.0.0.0" || bound == "::" ? "127.0.0.1" : bound
                lock.withLock { server.config.baseURL = "http://\(host):\(port)" }
            }
            await onRunning(channel)
        }
    }
}
