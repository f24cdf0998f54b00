import Foundation
public import Hummingbird
import HummingbirdWebSocket
public import LabCrypto
public import LabKernel
import ServerStorage
import HummingbirdCore
import NIOWebSocket
public import NIOCore
public import SecureChatServer
public import ServiceLifecycle

/// The d3chat reference server on a real port: the `ChatServer` core behind Hummingbird,
/// with `/ws?ticket=` upgraded to a WebSocket.
///
/// Requests and socket frames run through the core one at a time (under a lock); the
/// frames it answers with are handed to each connection's writer, which sends them in
/// order. A bad ticket is accepted as a WebSocket and closed with 4001, as d3chat does.
///
/// A socket joins the core before its upgrade is answered: a client that sees the socket
/// open has missed no event (one sent before its session starts waits in its writer).
/// One whose session never starts (the client left during the handshake) is dropped
/// after `handshakeGrace`.
public final class SecureChatLiveServer: ReferenceServer, @unchecked Sendable {
    public let name = "chat"
    public let defaultPort: Int
    public let summary = "d3chat: /api/v1/auth, /keys, /channels, /admin … and /ws?ticket="
    let lock = NSLock()
    var server: ChatServer
    let clock = LiveClock()
    var writers: [Int: AsyncStream<SocketCommand>.Continuation] = [:]
    /// Sockets that joined the core and whose session has not started.
    var handshaking: Set<Int> = []
    static let handshakeGrace: Duration = .seconds(10)
    let store: SQLiteChatServerStore

    /// Opens (or creates) `<dataDirectory>/chat.sqlite` and loads what it holds.
    public init(dataDirectory: String, defaultPort: Int = 7720, passwordCost: PasswordHash.Cost = .interactive, seed: UInt64? = nil,
                configure: (inout ChatServerConfig) -> Void = { _ in }) throws {
        self.defaultPort = defaultPort
        try FileManager.default.createDirectory(atPath: dataDirectory, withIntermediateDirectories: true)
        store = try SQLiteChatServerStore(path: (dataDirectory as NSString).appendingPathComponent("chat.sqlite"))
        var config = ChatServerConfig()
        config.passwordCost = passwordCost
        configure(&config)
        // A fresh seed per start: ids and tokens never repeat those of an earlier run.
        server = ChatServer(state: try store.load(), config: config, seed: StreamSeed(seed ?? UInt64.random(in: 1...UInt64.max)), wallClock: clock.origin)
        if let max = server.state.settings["max_message_bytes"]?.numberValue { server.config.maxContentBytes = Int(max) }
    }

    /// Writes what a request changed; on failure the state goes back to the disk's and
    /// the request fails.
    func commit(_ changes: [ChatStoreChange]) -> Bool {
        do {
            try store.apply(changes)
            return true
        } catch {
            server.state = (try? store.load()) ?? server.state
            return false
        }
    }

    public var details: [String] { ["the first account registered is the admin; WebSocket: /ws?ticket=<POST /api/v1/auth/ws-ticket>"] }

    var now: Instant { clock.now }

    /// One request: under the lock, except a register's or login's Argon2id work, which
    /// runs between the two phases so it never stalls other users' traffic.
    public func handle(_ request: HTTPRequestMessage) -> HTTPResponseMessage {
        let first: FirstPhase = lock.withLock {
            switch server.begin(request, now: now) {
            case .reply(let reply): return .answered(settle(reply))
            case .password(let job): return .waiting(job)
            }
        }
        switch first {
        case .answered(let response): return response
        case .waiting(let job):
            let result = job.run()
            return lock.withLock { settle(server.finish(job, result, now: now)) }
        }
    }

    enum FirstPhase {
        case answered(HTTPResponseMessage)
        case waiting(PasswordJob)
    }

    /// Commits what the request changed, then hands its frames to the sockets (called
    /// under the lock, in the same hold as the change).
    func settle(_ reply: ChatReply) -> HTTPResponseMessage {
        guard commit(reply.changes) else { return .json(500, ["detail": "Internal server error"]) }
        dispatch(reply.outputs)
        return reply.response
    }

    /// Hands frames to their connections' writers (called under the lock).
    func dispatch(_ outputs: [ChatOutput]) {
        for output in outputs {
            switch output {
            case .send(let connection, let payload): writers[connection]?.yield(.text(payload.canonicalText))
            case .close(let connection, let code, let reason):
                writers[connection]?.yield(.close(code, reason))
                writers[connection]?.finish()
                writers[connection] = nil
            }
        }
    }

    /// What a socket's ticket came to when its upgrade was asked for.
    enum Joining {
        /// It joined the core: its frames wait in `frames` until the session drains them.
        case joined(id: Int, frames: AsyncStream<SocketCommand>, writer: AsyncStream<SocketCommand>.Continuation)
        case refused(code: UInt16, reason: String)
    }

    /// Checks a socket's ticket before the upgrade is answered; an accepted one joins the
    /// core now, with a writer that keeps its frames for the session.
    func join(ticket: String) -> Joining {
        let joining = lock.withLock { () -> Joining in
            switch server.connect(ticket: ticket, now: now) {
            case .refused(let code, let reason): return .refused(code: code, reason: reason)
            case .accepted(let id):
                let (frames, writer) = AsyncStream<SocketCommand>.makeStream()
                writers[id] = writer
                handshaking.insert(id)
                return .joined(id: id, frames: frames, writer: writer)
            }
        }
        if case .joined(let id, _, _) = joining {
            Task { [self] in
                try? await Task.sleep(for: Self.handshakeGrace)
                lock.withLock { if handshaking.remove(id) != nil { leave(id) } }
            }
        }
        return joining
    }

    /// A socket leaves the core (called under the lock).
    func leave(_ id: Int) {
        server.disconnect(id)
        writers[id]?.finish()
        writers[id] = nil
    }

    /// One WebSocket after its upgrade: a writer draining the core's frames and a reader
    /// feeding the client's frames to the core; a refused ticket's socket is closed with
    /// the core's code (and one whose handshake outlasted the grace, with 1011).
    func session(_ joining: Joining, inbound: WebSocketInboundStream, outbound: WebSocketOutboundWriter) async {
        switch joining {
        case .refused(let code, let reason):
            try? await outbound.close(.unknown(code), reason: reason)
        case .joined(let id, let frames, let writer):
            guard lock.withLock({ handshaking.remove(id) != nil }) else {
                try? await outbound.close(.unexpectedServerError, reason: "the handshake took too long")
                return
            }
            await runSocket(inbound: inbound, outbound: outbound, commands: frames, closer: writer, maxMessage: 1 << 16) { [self] text in
                lock.withLock { dispatch(server.receive(id, text: text, now: now)) }
            } ended: {
                lock.withLock { leave(id) }
            }
        }
    }

    public func makeService(configuration: ApplicationConfiguration, transport: ServerTransport,
                            onRunning: @escaping @Sendable (any Channel) async -> Void) throws -> any Service {
        let responder = CoreResponder { [self] request in self.handle(request) }
        let upgrade = try transport.http1WebSocketUpgrade { [self] request, _, _ in
            let target = request.path ?? ""
            guard target == "/ws" || target.hasPrefix("/ws?") else { return .dontUpgrade }
            if let shed = FaultInjection.shedsUpgrade() { return shed }
            let query = HTTPRequestMessage(method: "GET", target: target).query
            let ticket = query["ticket"] ?? ""
            let joining = join(ticket: ticket)
            return .upgrade([:]) { inbound, outbound, _ in await self.session(joining, inbound: inbound, outbound: outbound) }
        }
        return Application(responder: responder, server: upgrade, configuration: configuration) { channel in
            await onRunning(channel)
        }
    }

    /// `/.well-known/d3chat-server` names it as the API's base.
    public func listening(at url: String) {
        lock.withLock { server.config.baseURL = url }
    }
}
