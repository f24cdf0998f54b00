import Foundation
public import AgentRuntimeServer
public import AgentRuntimeWire
public import Hummingbird
import HummingbirdCore
import HummingbirdWebSocket
import LabCrypto
public import LabKernel
import NIOCore
import NIOWebSocket
import ServerStorage
public import ServiceLifecycle

/// The Mozaiks agent runtime on a real port: the `AgentServer` core behind Hummingbird,
/// `/ws/{workflow}/{app}/{chat}/{user}` upgraded to a WebSocket, state in
/// `<data>/agent-runtime.sqlite` and uploads under `<data>/agent-uploads/`.
///
/// Requests, frames, wake-ups and backend output run through the core one at a time
/// (under a lock); what a call changed is committed before its answer and frames go out,
/// so an acknowledged input survives a crash. The core asks for wake-ups (a scripted
/// step due later): each becomes a sleeping task that calls `runDue` then; a stale one
/// does nothing. Command-backend programs run as child processes (`CommandBackend`).
/// Tokens are HS256 under `<data>/agent-runtime.key`; `fleetlab token` signs with it too.
/// Nothing here logs a body, a prompt, a frame or a token.
public final class AgentRuntimeLiveServer: ReferenceServer, @unchecked Sendable {
    public let name = "agent-runtime"
    public let defaultPort: Int
    public let summary = "Mozaiks runtime: /api/workflows, /api/chats/…, /ws/{workflow}/{app}/{chat}/{user}"
    let lock = NSLock()
    var server: AgentServer
    let store: SQLiteAgentServerStore
    let clock = LiveClock()
    var writers: [Int: AsyncStream<SocketCommand>.Continuation] = [:]
    let backend = CommandBackend()

    /// The largest frame (and message) a client may send: a user input of
    /// `ClientMessage.maxTextBytes` with its JSON around it.
    static let maxFrameBytes = 1 << 17

    /// The app and user of the development token `fleetlab serve` prints.
    public static let developmentApp = "dev-app"
    public static let developmentUser = "dev-user"

    public init(dataDirectory: String, workflows: [AgentWorkflow], defaultPort: Int = 7730, authRequired: Bool = true,
                seed: UInt64? = nil, configure: (inout AgentServerConfig) -> Void = { _ in }) throws {
        self.defaultPort = defaultPort
        try FileManager.default.createDirectory(atPath: dataDirectory, withIntermediateDirectories: true)
        store = try SQLiteAgentServerStore(path: (dataDirectory as NSString).appendingPathComponent("agent-runtime.sqlite"))
        var config = AgentServerConfig()
        config.authRequired = authRequired
        config.tokenKey = try Self.tokenKey(dataDirectory: dataDirectory)
        config.workflows = workflows
        configure(&config)
        server = AgentServer(state: try store.load(), config: config, seed: StreamSeed(seed ?? UInt64.random(in: 1...UInt64.max)),
                             wallClock: clock.origin)
        lock.withLock { carryOut(server.recover(now: now)) }
    }

    /// The HS256 key under `--data` (created on first use, mode 0600).
    public static func tokenKey(dataDirectory: String) throws -> [UInt8] {
        try SecretKeyFile.loadOrCreate(at: (dataDirectory as NSString).appendingPathComponent("agent-runtime.key")).bytes
    }

    /// A token for `app` and `user`, valid for `lifetime` from now.
    public static func mint(app: String, user: String, dataDirectory: String, lifetime: TimeSpan = .days(30)) throws -> String {
        let seconds = Int64(Date().timeIntervalSince1970)
        return RuntimeToken(appID: app, userID: user, issuedAt: seconds, expiresAt: seconds + lifetime.nanoseconds / 1_000_000_000)
            .sign(key: try tokenKey(dataDirectory: dataDirectory))
    }

    public var details: [String] {
        lock.withLock {
            guard server.config.authRequired else { return ["no auth (--no-auth): identifiers in paths and bodies are taken as given"] }
            let seconds = Int64(Date().timeIntervalSince1970)
            let token = RuntimeToken(appID: Self.developmentApp, userID: Self.developmentUser, issuedAt: seconds, expiresAt: seconds + 30 * 86_400)
                .sign(key: server.config.tokenKey)
            return ["token for app_id=\(Self.developmentApp) user_id=\(Self.developmentUser): \(token)"]
        }
    }

    var now: Instant { clock.now }

    public func handle(_ request: HTTPRequestMessage) -> HTTPResponseMessage {
        lock.withLock { carryOut(server.handle(request, now: now)) }
    }

    /// Commits a reply's changes, then hands its frames to sockets, arms its wake-ups and
    /// starts its programs (called under the lock). A failed commit reloads the state from
    /// disk and answers 500: nothing the client was told about is lost.
    @discardableResult
    func carryOut(_ reply: AgentReply) -> HTTPResponseMessage {
        do {
            try store.apply(reply.changes)
        } catch {
            if let state = try? store.load() { server.state = state }
            return .json(500, ["detail": "Internal server error"])
        }
        for output in reply.outputs {
            switch output {
            case .send(let connection, let text): writers[connection]?.yield(.text(text))
            case .close(let connection, let code, let reason):
                writers[connection]?.yield(.close(code, reason))
                writers[connection]?.finish()
                writers[connection] = nil
            }
        }
        for wakeup in reply.wakeups { arm(wakeup) }
        for command in reply.commands { start(command) }
        return reply.response
    }

    func arm(_ wakeup: AgentWakeup) {
        let delay = max(0, (wakeup.at - now).nanoseconds)
        Task { [self] in
            try? await Task.sleep(nanoseconds: UInt64(delay))
            lock.withLock { carryOut(server.runDue(wakeup.chatID, now: max(now, wakeup.at))) }
        }
    }

    func start(_ command: BackendCommand) {
        backend.run(argv: command.argv, input: command.input, timeout: command.timeout) { [self] event in
            lock.withLock {
                switch event {
                case .output(let text): carryOut(server.backendOutput(run: command.run, text: text, now: now))
                case .finished(let status, let reason): carryOut(server.backendFinished(run: command.run, status: status, reason: reason, now: now))
                }
            }
        }
    }

    /// One socket: the core accepts or refuses it (1008), then a writer drains the core's
    /// frames for it and a reader feeds it the client's.
    func session(target: String, inbound: WebSocketInboundStream, outbound: WebSocketOutboundWriter) async {
        let request = HTTPRequestMessage(method: "GET", target: target)
        let (stream, continuation) = AsyncStream<SocketCommand>.makeStream()
        let accepted: Int? = lock.withLock {
            switch server.connect(path: request.path, query: request.query, now: now) {
            case .accepted(let id, let reply):
                writers[id] = continuation
                carryOut(reply)
                return id
            case .refused(let code, let reason):
                continuation.yield(.close(code, reason))
                continuation.finish()
                return nil
            }
        }
        guard let id = accepted else {
            // Refused: the close is all there is to write.
            for await case .close(let code, let reason) in stream { try? await outbound.close(.unknown(code), reason: reason) }
            return
        }
        await runSocket(inbound: inbound, outbound: outbound, commands: stream, closer: continuation, maxMessage: Self.maxFrameBytes) { [self] text in
            lock.withLock { _ = carryOut(server.receive(id, text: text, now: now)) }
        } ended: {
            lock.withLock {
                server.disconnect(id)
                writers[id]?.finish()
                writers[id] = nil
            }
        }
    }

    public func makeService(configuration: ApplicationConfiguration, transport: ServerTransport,
                            onRunning: @escaping @Sendable (any Channel) async -> Void) throws -> any Service {
        let limit = lock.withLock { server.config.maxUploadBytes } + 256 * 1024
        let responder = CoreResponder(maxBodyBytes: limit) { [self] request in self.handle(request) }
        let socketConfiguration = HTTP1WebSocketUpgradeChannel.Configuration(
            ws: WebSocketServerConfiguration(maxFrameSize: Self.maxFrameBytes, closeTimeout: .seconds(2)))
        let upgrade = try transport.http1WebSocketUpgrade(configuration: socketConfiguration) { request, _, _ in
            let target = request.path ?? ""
            guard target.hasPrefix("/ws/") else { return .dontUpgrade }
            if let shed = FaultInjection.shedsUpgrade() { return shed }
            return .upgrade([:]) { [self] inbound, outbound, _ in await self.session(target: target, inbound: inbound, outbound: outbound) }
        }
        return Application(responder: responder, server: upgrade, configuration: configuration) { channel in await onRunning(channel) }
    }
}
