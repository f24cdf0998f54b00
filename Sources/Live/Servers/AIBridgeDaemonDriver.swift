public import Foundation
public import AIBridgeDaemon
import LabCrypto
public import LabKernel

/// The AI bridge's desktop daemon on real sockets: the `BridgeDaemon` core, a tunnel it
/// dials to the relay (`WebSocketClient`), its timers as tasks, and its command provider
/// as child processes (`CommandBackend`). Its identity (the Ed25519 key the relay knows
/// it by) and its id live under the data directory; its pairing key pair is new at every
/// start, as the seed's desktop app's is. Used in process by `fleetlab serve` and on its
/// own by `fleetlab ai-daemon`.
///
/// It reports what a person at the desktop sees (`Event`): PINs to type on a phone,
/// pairings, the tunnel going up and down, and why it could not open. Never a prompt or a
/// token.
public final class AIBridgeDaemonDriver: @unchecked Sendable {
    // Unchecked: every field is touched under `lock`.
    public enum Event: Sendable {
        case pin(String, expiresAt: Date)
        case paired(deviceID: String)
        case pairingClosed(String)
        /// The tunnel opened (true) or an open tunnel closed (false).
        case connected(Bool)
        /// A dial of the tunnel failed, and why: nothing answers there, or the server
        /// refused the upgrade (a server that is not a relay answers 404). It dials again.
        case dialFailed(String)
        case refused(String)
    }

    let lock = NSLock()
    var core: BridgeDaemon
    let host: String
    let port: Int
    /// The relay's tunnel over TLS (`https://` relay, `wss://` tunnel).
    let tls: ClientTLS?
    /// The proxy whose tunnel reaches the relay, if any.
    let proxy: ClientProxy?
    var socket: WebSocketConnection?
    var socketRun = 0
    /// Why the last dial failed; nil once a tunnel opens.
    var lastDialFailure: (any Error)?
    let timer = DeadlineTimer()
    let clock = LiveClock()
    var programs: [Int: CommandBackend.Running] = [:]
    let backend = CommandBackend()
    let report: @Sendable (Event) -> Void
    public let daemonID: String

    /// `relay`: the relay's base URL (`http://host:port`, or `https://…`: its tunnel then
    /// over TLS, checked by `tls`); the tunnel is its `/v1/tunnel`. The identity key and the
    /// id are kept under `dataDirectory` (made on first start).
    public convenience init(relay: String, dataDirectory: String, daemonID: String? = nil, chat: BridgeDaemon.ChatProvider? = nil,
                            tls: ClientTLS = .system, proxies: ProxyRoutes = .direct, report: @escaping @Sendable (Event) -> Void) throws {
        try FileManager.default.createDirectory(atPath: dataDirectory, withIntermediateDirectories: true)
        let identity = try SecretKeyFile.loadOrCreate(at: (dataDirectory as NSString).appendingPathComponent("ai-daemon.key")).bytes
        let idPath = (dataDirectory as NSString).appendingPathComponent("ai-daemon.id")
        let id: String
        if let daemonID {
            id = daemonID
        } else if let stored = try? String(contentsOfFile: idPath, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines), !stored.isEmpty {
            id = stored
        } else {
            id = "daemon-" + SystemRandom.bytes(6).hexString
            try Data(id.utf8).write(to: URL(fileURLWithPath: idPath))
        }
        try self.init(relay: relay, identity: identity, daemonID: id, chat: chat, tls: tls, proxies: proxies, report: report)
    }

    /// A daemon whose identity lives only in memory: a load test's desktops, each a daemon
    /// the relay meets for the first time. `identity` is the Ed25519 seed (32 bytes).
    public init(relay: String, identity: [UInt8], daemonID: String, chat: BridgeDaemon.ChatProvider? = nil, tls: ClientTLS = .system,
                proxies: ProxyRoutes = .direct, report: @escaping @Sendable (Event) -> Void) throws {
        guard let endpoint = try? HTTPClient.Endpoint(relay, requiringPort: true) else {
            throw SecretKeyFile.Failure(description: "the relay's URL takes http://host:port or https://host[:port], got \(relay)")
        }
        host = endpoint.host
        port = endpoint.port
        self.tls = endpoint.secure ? tls : nil
        proxy = proxies.proxy(for: endpoint.host, port: endpoint.port, secure: endpoint.secure)
        self.report = report
        self.daemonID = daemonID
        var config = BridgeDaemon.Config(daemonID: daemonID)
        config.keepPairingOpen = true
        if let chat { config.chat = chat }
        var seed: UInt64 = 0
        SystemRandom.bytes(8).withUnsafeBytes { seed = $0.load(as: UInt64.self) }
        core = try BridgeDaemon(config: config, identitySeed: identity, seed: StreamSeed(seed))
    }

    var now: Instant { clock.now }

    /// Opens a pairing session and dials the relay.
    public func start() {
        feed(.openPairing)
        feed(.start)
    }

    /// Stops dialing and drops the tunnel (the desktop app quits or sleeps).
    public func stop() {
        feed(.sleep)
        timer.cancel()
    }

    /// The PIN on offer now, if any.
    public var pin: String? { lock.withLock { core.session?.pin } }
    public var isConnected: Bool { lock.withLock { core.isConnected } }
    /// Why the last dial of the tunnel failed, while none has opened since.
    public var dialFailure: (any Error)? { lock.withLock { lastDialFailure } }

    func feed(_ input: DaemonInput) {
        lock.withLock {
            let effects = core.handle(input, now: now)
            for effect in effects { carryOut(effect) }
            armTimer()
        }
    }

    /// One effect (under the lock).
    func carryOut(_ effect: DaemonEffect) {
        switch effect {
        case .connect:
            socketRun += 1
            let run = socketRun
            Task { [host, port, tls, proxy] in
                do {
                    let connection = try await WebSocketClient.connect(host: host, port: port, target: "/v1/tunnel", tls: tls, proxy: proxy)
                    guard self.adopt(connection, run: run) else { return connection.close() }
                    self.feed(.tunnelOpened)
                    self.report(.connected(true))
                    for await event in connection.events {
                        switch event {
                        case .text(let text): if self.current(run) { self.feed(.tunnelText(text)) }
                        case .closed: break
                        }
                    }
                    if self.current(run) {
                        self.lock.withLock { self.socket = nil }
                        self.report(.connected(false))
                        self.feed(.tunnelClosed)
                    }
                } catch {
                    // Only `connect` throws: the tunnel never opened.
                    if self.current(run) {
                        self.lock.withLock { self.lastDialFailure = error }
                        self.report(.dialFailed("\(error)"))
                        self.feed(.tunnelClosed)
                    }
                }
            }
        case .send(let text): socket?.send(text)
        case .disconnect:
            socketRun += 1
            socket?.close()
            socket = nil
        case .startCommand(let run, let argv, let input, let timeout):
            programs[run] = backend.run(argv: argv, input: input, timeout: timeout) { [self] event in
                switch event {
                case .output(let text): feed(.backendOutput(run: run, text: text))
                case .finished(let status, let reason):
                    lock.withLock { programs[run] = nil }
                    feed(.backendFinished(run: run, status: status, reason: reason))
                }
            }
        case .stopCommand(let run): programs.removeValue(forKey: run)?.stop()
        case .pairingOffered(let pin, let expiresAt):
            report(.pin(pin, expiresAt: Date(timeIntervalSince1970: Double(expiresAt.nanoseconds) / 1e9)))
        case .pairingClosed(let reason): report(.pairingClosed(reason))
        case .paired(let device): report(.paired(deviceID: device))
        case .refused(let reason): report(.refused(reason))
        }
    }

    func adopt(_ connection: WebSocketConnection, run: Int) -> Bool {
        lock.withLock {
            guard run == socketRun else { return false }
            socket = connection
            lastDialFailure = nil
            return true
        }
    }

    func current(_ run: Int) -> Bool { lock.withLock { run == socketRun } }

    /// The core's next deadline, armed (under the lock).
    func armTimer() {
        timer.arm(core.nextDeadline, now: now) { [weak self] in self?.feed(.timerFired) }
    }
}
