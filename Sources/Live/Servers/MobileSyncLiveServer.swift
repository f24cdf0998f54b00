import Foundation
public import Hummingbird
public import LabKernel
import ServerStorage
import LabStore
public import MobileSyncServer
import NIOCore
public import ServiceLifecycle

/// The orch8 mobile sync server on a real port: the `SyncServer` core behind Hummingbird,
/// its state in `<data>/mobile-sync.sqlite`.
///
/// Requests run one at a time through the core (under a lock); the rows a request wrote
/// are committed to SQLite before its response is sent, so an answered request is never
/// lost in a crash. Secrets in the database are sealed under `<data>/mobile-sync.key`
/// (`SecretKeyFile`). Pushes are kept in a bounded log (no APNs or FCM credentials here);
/// a device subscribed to the development push channel (`PushChannels`) is woken at once
/// by each new command for it, and devices that only poll see the commands at their next
/// sync.
public final class MobileSyncLiveServer: ReferenceServer, @unchecked Sendable {
    public let name = "mobile-sync"
    public let defaultPort: Int
    public let summary = "orch8 mobile sync: /api/v1/mobile/*, /credentials, /telemetry/mobile, /dashboard/mobile-sync"
    let lock = NSLock()
    var server: SyncServer
    let store: SQLiteSyncServerStore
    let clock = LiveClock()
    /// The most recent pushes, newest last (at most `pushLogLimit`).
    public private(set) var pushLog: [PushWake] = []
    static let pushLogLimit = 1_000
    let channels = PushChannels()

    /// Opens (or creates) the database under `dataDirectory` and readies the server: a
    /// fresh one gets its root API key and manifest keys here.
    public init(dataDirectory: String, defaultPort: Int = 7710, authRequired: Bool = true, seed: UInt64? = nil) throws {
        self.defaultPort = defaultPort
        try FileManager.default.createDirectory(atPath: dataDirectory, withIntermediateDirectories: true)
        let sealingKey = try SecretKeyFile.loadOrCreate(at: (dataDirectory as NSString).appendingPathComponent("mobile-sync.key"))
        store = try SQLiteSyncServerStore(path: (dataDirectory as NSString).appendingPathComponent("mobile-sync.sqlite"),
                                          sealingKey: sealingKey)
        let ids = seed ?? UInt64.random(in: 1...UInt64.max)
        server = SyncServer(state: try store.load(), config: SyncServerConfig(authRequired: authRequired), seed: StreamSeed(ids),
                            wallClock: clock.origin)
        server.bootstrap(now: clock.now)
        try store.apply(server.state.takeChanges())
    }

    public var details: [String] {
        authRequired ? ["root API key: \(rootAPIKey)  (x-api-key header; POST /api/v1/mobile/tenants makes tenant keys)",
                        "dashboard: /dashboard/mobile-sync (sign in with an API key)"]
            : ["no auth (--no-auth): every request is accepted, tenants fall open"]
    }

    /// The root API key (printed by `fleetlab serve`).
    public var rootAPIKey: String { lock.withLock { server.rootAPIKey ?? "" } }
    public var authRequired: Bool { lock.withLock { server.config.authRequired } }

    var now: Instant { clock.now }

    /// Runs one request through the core and commits its rows.
    public func handle(_ request: HTTPRequestMessage) throws -> HTTPResponseMessage {
        if let page = MobileSyncDashboardPage.response(to: request) { return page }
        return try lock.withLock {
            let reply = server.handle(request, now: now)
            do {
                try store.apply(reply.changes)
            } catch {
                // The rows did not reach the disk: reload what did, and fail the request.
                server.state = (try? store.load()) ?? server.state
                throw error
            }
            pushLog += reply.pushes
            if pushLog.count > Self.pushLogLimit { pushLog.removeFirst(pushLog.count - Self.pushLogLimit) }
            wakeSubscribers(reply)
            return reply.response
        }
    }

    /// New commands wake their device's push streams (with the signed metadata when the
    /// core made a push for it).
    func wakeSubscribers(_ reply: SyncServerReply) {
        guard channels.count > 0 else { return }
        for change in reply.changes {
            guard case .command(let command) = change, command.ackedAtMs == nil else { continue }
            let push = reply.pushes.first { $0.commandID == command.id }
            channels.wake(device: command.deviceID, commandID: command.id, metadata: push?.metadata)
        }
    }

    public func makeService(configuration: ApplicationConfiguration, transport: ServerTransport,
                            onRunning: @escaping @Sendable (any Channel) async -> Void) throws -> any Service {
        let channels = self.channels
        let responder = CoreResponder(handle: { [self] request in try self.handle(request) }, stream: { answer in
            answer.header(SyncServer.pushStreamHeader).map { channels.body(for: $0, first: answer.body) }
        })
        let application = Application(responder: responder, server: try transport.http1(), configuration: configuration) { channel in
            await onRunning(channel)
        }
        // A push stream never ends by itself: a graceful shutdown ends them all, or it
        // would wait for them forever.
        return StreamClosingService(inner: application) { channels.closeAll() }
    }

    /// The manifest's sequence links start with it.
    public func listening(at url: String) {
        lock.withLock { server.config.baseURL = url }
    }
}

/// Runs `inner` and calls `onShutdown` when a graceful shutdown begins.
struct StreamClosingService: Service {
    let inner: any Service
    let onShutdown: @Sendable () -> Void

    func run() async throws {
        try await withGracefulShutdownHandler {
            try await inner.run()
        } onGracefulShutdown: {
            onShutdown()
        }
    }
}
