import Foundation
public import AIBridgeRelay
import HTTPTypes
public import Hummingbird
import HummingbirdCore
import HummingbirdWebSocket
import LabKernel
public import NIOCore
import NIOWebSocket
import ServerStorage
public import ServiceLifecycle

/// The Mobile AI Bridge relay on a real port: the `BridgeRelay` core behind Hummingbird,
/// `/v1/tunnel` upgraded to a WebSocket for daemons, `POST /v1/chat` answered whole or as
/// Server-Sent Events, state in `<data>/ai-bridge.sqlite`. With `daemon`, a desktop daemon
/// runs in the same process and dials it once it listens (`fleetlab serve`; `--without
/// ai-daemon` leaves it out).
///
/// Calls into the core run under a lock; what they change is committed before any answer
/// goes out. An exchange's first outcome (a whole response, or the start of a stream) is
/// handed to the request waiting for it; stream events are written as they come, and a
/// phone that goes away mid-stream makes the relay cancel the request on the daemon.
/// Nothing is logged per request: no body, PIN or token.
public final class AIBridgeRelayLiveServer: ReferenceServer, @unchecked Sendable {
    public let name = "ai-bridge"
    public let defaultPort: Int
    public let summary = "Mobile AI Bridge relay: POST /v1/pair/confirm, POST /v1/chat (SSE), /v1/tunnel for daemons"
    let lock = NSLock()
    var relay: BridgeRelay
    let store: SQLiteBridgeRelayStore
    let clock = LiveClock()
    var tunnels: [Int: AsyncStream<SocketCommand>.Continuation] = [:]
    var sinks: [Int: ExchangeSink] = [:]
    let dataDirectory: String
    let withDaemon: Bool
    /// The in-process daemon, once the relay listens.
    public private(set) var daemon: AIBridgeDaemonDriver?
    let output: @Sendable (String) -> Void

    public init(dataDirectory: String, defaultPort: Int = 7740, withDaemon: Bool = true, seed: UInt64? = nil,
                output: @escaping @Sendable (String) -> Void = AIBridgeRelayLiveServer.printLine,
                configure: (inout RelayConfig) -> Void = { _ in }) throws {
        self.defaultPort = defaultPort
        self.dataDirectory = dataDirectory
        self.withDaemon = withDaemon
        self.output = output
        try FileManager.default.createDirectory(atPath: dataDirectory, withIntermediateDirectories: true)
        store = try SQLiteBridgeRelayStore(path: (dataDirectory as NSString).appendingPathComponent("ai-bridge.sqlite"))
        var config = RelayConfig()
        configure(&config)
        relay = BridgeRelay(state: try store.load(), config: config, seed: StreamSeed(seed ?? UInt64.random(in: 1...UInt64.max)))
        Task { [weak self] in
            // Deadlines: exchanges past theirs, PIN sessions past five minutes.
            while let server = self {
                server.lock.withLock { server.carryOut(server.relay.expire(now: server.clock.now)) }
                try? await Task.sleep(for: .milliseconds(250))
            }
        }
    }

    /// A line on standard output (where `fleetlab serve` prints later PINs).
    public static func printLine(_ line: String) { FileHandle.standardOutput.write(Data((line + "\n").utf8)) }

    /// The in-process daemon's first PIN reaches the relay in a frame on its tunnel, some
    /// milliseconds after the daemon shows it: waits for that, so the PIN `details` prints
    /// is one a phone can confirm at once. At most 30 s: on a loaded machine the tunnel's
    /// first dial can take seconds (5 s was passed in full test runs), and the supervisor
    /// waits 60 s for its workers to be ready.
    public func settle() async {
        guard withDaemon else { return }
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            if let pin = daemon?.pin, lock.withLock({ relay.state.offers(pin: pin) }) { return }
            try? await Task.sleep(for: .milliseconds(20))
        }
    }

    public var details: [String] {
        guard let pin = daemon?.pin else { return withDaemon ? [] : ["no daemon here (--without ai-daemon): run `fleetlab ai-daemon --relay URL`"] }
        return ["pairing PIN: \(pin)  (valid 5 minutes; a new one is printed when it is used or expires)"]
    }

    // MARK: Requests

    /// One request: answered at once, or when its exchange's first outcome comes.
    func exchange(_ request: HTTPRequestMessage) async -> (start: ExchangeSink.Start, sink: ExchangeSink) {
        let sink = ExchangeSink()
        let immediate: HTTPResponseMessage? = lock.withLock {
            let reply = relay.handle(request, now: clock.now)
            if let id = reply.pending { sinks[id] = sink }
            carryOut(reply)
            return reply.pending == nil ? reply.response : nil
        }
        if let immediate { return (.response(immediate), sink) }
        return (await sink.first(), sink)
    }

    func abandon(_ sink: ExchangeSink) {
        lock.withLock {
            guard let id = sinks.first(where: { $0.value === sink })?.key else { return }
            sinks[id] = nil
            carryOut(relay.exchangeAbandoned(id))
        }
    }

    /// Commits a reply's changes, then carries out its outputs (under the lock).
    func carryOut(_ reply: RelayReply) {
        do { try store.apply(reply.changes) } catch {
            if let state = try? store.load() { relay.state.daemons = state.daemons }
        }
        for output in reply.outputs {
            switch output {
            case .respond(let id, let response): sinks.removeValue(forKey: id)?.deliver(.response(response))
            case .streamOpen(let id): sinks[id]?.openStream()
            case .streamEvent(let id, let event): sinks[id]?.yield(ServerSentEvents.encode(event))
            case .streamClose(let id): sinks.removeValue(forKey: id)?.finish()
            case .tunnelSend(let tunnel, let text): tunnels[tunnel]?.yield(.text(text))
            case .tunnelClose(let tunnel, let code, let reason):
                tunnels[tunnel]?.yield(.close(code, reason))
                tunnels[tunnel]?.finish()
                tunnels[tunnel] = nil
            }
        }
    }

    // MARK: Tunnels

    func tunnel(inbound: WebSocketInboundStream, outbound: WebSocketOutboundWriter) async {
        let (stream, continuation) = AsyncStream<SocketCommand>.makeStream()
        let id: Int = lock.withLock {
            let (id, reply) = relay.tunnelOpened(now: clock.now)
            tunnels[id] = continuation
            carryOut(reply)
            return id
        }
        await runSocket(inbound: inbound, outbound: outbound, commands: stream, closer: continuation, maxMessage: 1 << 22) { [self] text in
            lock.withLock { carryOut(relay.tunnelReceived(id, text: text, now: clock.now)) }
        } ended: {
            lock.withLock {
                carryOut(relay.tunnelClosed(id, now: clock.now))
                tunnels[id]?.finish()
                tunnels[id] = nil
            }
        }
    }

    public func makeService(configuration: ApplicationConfiguration, transport: ServerTransport,
                            onRunning: @escaping @Sendable (any Channel) async -> Void) throws -> any Service {
        let responder = RelayResponder(server: self, maxBodyBytes: lock.withLock { relay.config.maxBodyBytes })
        let upgrade = try transport.http1WebSocketUpgrade(configuration: .init(ws: .init(maxFrameSize: 1 << 22, closeTimeout: .seconds(2)))) { request, _, _ in
            guard request.path == "/v1/tunnel" else { return .dontUpgrade }
            if let shed = FaultInjection.shedsUpgrade() { return shed }
            return .upgrade([:]) { [self] inbound, outbound, _ in await tunnel(inbound: inbound, outbound: outbound) }
        }
        let scheme = transport.scheme("http")
        return Application(responder: responder, server: upgrade, configuration: configuration) { [self] channel in
            // The daemon in this process dials its relay on loopback, whatever phones use.
            if let port = channel.localAddress?.port, withDaemon { startDaemon(url: "\(scheme)://127.0.0.1:\(port)") }
            await onRunning(channel)
        }
    }

    /// Paired phones are sent here for their requests (`worker_url`).
    public func listening(at url: String) {
        lock.withLock { relay.config.workerURL = url }
    }

    /// The in-process daemon: its PINs printed as it offers them.
    func startDaemon(url: String) {
        let output = output
        let first = LockedBox(true)
        // Over TLS it reaches its own relay's listener on loopback, where checking the
        // certificate (made for the names phones use) would prove nothing.
        let tls = url.hasPrefix("https:") ? ClientTLS(verify: false) : .system
        guard let driver = try? AIBridgeDaemonDriver(relay: url, dataDirectory: dataDirectory, tls: tls, report: { event in
            guard case .pin(let pin, let expiresAt) = event else { return }
            // The first PIN is in `details`; later ones are printed as they come.
            let isFirst = first.withLock { (value: inout Bool) -> Bool in
                defer { value = false }
                return value
            }
            guard !isFirst else { return }
            let time = ISO8601DateFormatter.string(from: expiresAt, timeZone: .current, formatOptions: [.withTime, .withColonSeparatorInTime])
            output("      ai-bridge pairing PIN: \(pin)  (valid until \(time))")
        }) else { return }
        lock.withLock { daemon = driver }
        driver.start()
    }
}

/// Hands a pending exchange's outcome to the request waiting for it.
final class ExchangeSink: @unchecked Sendable {
    // Unchecked: every field is touched under `lock`.
    enum Start: Sendable {
        case response(HTTPResponseMessage)
        case stream(AsyncStream<ByteBuffer>)
    }

    let lock = NSLock()
    var outcome: Start?
    var waiter: CheckedContinuation<Start, Never>?
    var events: AsyncStream<ByteBuffer>.Continuation?

    func first() async -> Start {
        await withCheckedContinuation { continuation in
            let ready: Start? = lock.withLock {
                if let outcome { return outcome }
                waiter = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }

    func deliver(_ start: Start) {
        let waiting: CheckedContinuation<Start, Never>? = lock.withLock {
            guard outcome == nil else { return nil }
            outcome = start
            defer { waiter = nil }
            return waiter
        }
        waiting?.resume(returning: start)
    }

    func openStream() {
        let (stream, continuation) = AsyncStream<ByteBuffer>.makeStream()
        lock.withLock { events = continuation }
        deliver(.stream(stream))
    }

    func yield(_ bytes: [UInt8]) { lock.withLock { _ = events?.yield(ByteBuffer(bytes: bytes)) } }

    func finish() {
        lock.withLock { events?.finish() }
        deliver(.response(BridgeRelayGone.response))
    }
}

/// What a request gets when its exchange ended before anything was decided (not expected:
/// the core always answers first).
enum BridgeRelayGone {
    static let response = HTTPResponseMessage.json(502, ["error": "bridge_offline", "message": "the exchange ended"])
}

/// The relay's HTTP side: bodies collected with a limit, answers whole or streamed.
struct RelayResponder: HTTPResponder {
    typealias Context = PeerRequestContext
    let server: AIBridgeRelayLiveServer
    let maxBodyBytes: Int

    func respond(to request: Request, context: Context) async throws -> Response {
        let body: ByteBuffer
        do {
            body = try await CoreResponder.body(of: request, upTo: maxBodyBytes)
        } catch .tooLarge {
            return CoreResponder.response(.json(413, ["error": "payload_too_large", "limit": .number(Double(maxBodyBytes))]))
        } catch .unreadable(let reason) {
            return CoreResponder.response(.json(400, ["error": "bad_request", "message": .string(reason)]))
        }
        let message = CoreResponder.message(request, body: body, peer: context.peer)
        if let injected = await FaultInjection.play() { return CoreResponder.response(injected) }
        let (start, sink) = await server.exchange(message)
        switch start {
        case .response(let answer): return CoreResponder.response(answer)
        case .stream(let events):
            var fields = HTTPFields()
            fields[.contentType] = "text/event-stream"
            fields[.cacheControl] = "no-store"
            let server = server
            return Response(status: .ok, headers: fields, body: ResponseBody { writer in
                do {
                    for await buffer in events { try await writer.write(buffer) }
                    try await writer.finish(nil)
                } catch {
                    // The phone went away: the daemon stops working for it.
                    server.abandon(sink)
                    throw error
                }
            })
        }
    }
}
