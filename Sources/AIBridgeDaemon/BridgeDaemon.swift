public import AIBridgeWire
public import LabCrypto
public import LabKernel

/// The Mobile AI Bridge's desktop daemon (seed 001) as a sans-I/O core: it keeps a tunnel
/// to the relay, offers pairing sessions, issues tokens, and dispatches the commands that
/// come through: `ai_chat` (a streamed answer, scripted or from a local program) and
/// `list_models`.
///
/// Theory of operation. The driver dials the relay when told (`connect`) and feeds what
/// happens on the tunnel (`tunnelOpened`, `tunnelText`, `tunnelClosed`), timer expiries,
/// the user opening a pairing session, and the output of command-provider programs. The
/// tunnel opens with the relay's challenge, which the daemon signs with its Ed25519
/// identity (kept across restarts by the driver) together with its X25519 pairing key
/// (new at every start, so a restart invalidates the tokens it issued, as the seed says).
///
/// Dispatch follows the seed's extension model: parse the envelope (opening it first if
/// it is sealed to this daemon's key), match the command, validate its payload explicitly,
/// run its handler, answer with a normalised `response` or a stream. To add a command:
/// a case in `Command`, its payload check, its handler; nothing else changes. An unknown
/// command is 400 `unknown_command` with the supported list. A sealed request's answer is
/// sealed under the request's key; error bodies stay readable (they hold no prompt).
///
/// Nothing here logs; the driver must not either: prompts and tokens exist only in
/// memory, for as long as a request or a pairing takes.
public struct BridgeDaemon: Sendable {
    public var config: Config
    let identity: Ed25519.SigningKey
    /// The pairing key handed to phones: new at every start.
    public let keyPair: X25519.KeyPair
    var generator: SeededGenerator
    var link = Link.disconnected
    var asleep = false
    var reconnectAttempts = 0
    public internal(set) var session: Session?
    var requests: [Int: Active] = [:]
    var timers = TimerTable<Timer>()
    var nextRun = 1
    public internal(set) var stats = Stats()

    public struct Config: Sendable {
        public var daemonID: String
        public var chat: ChatProvider = .scripted(think: .milliseconds(400), wordsPerChunk: 3, every: .milliseconds(40))
        public var models = ["fleetlab-scripted-1"]
        public var pairingLifetime: TimeSpan = .minutes(5)
        /// Open a new pairing session whenever the last one is used, expires or dies.
        public var keepPairingOpen = false
        public var reconnectBase: TimeSpan = .seconds(1)
        public var reconnectMax: TimeSpan = .seconds(30)

        public init(daemonID: String) { self.daemonID = daemonID }
    }

    public enum ChatProvider: Sendable, Equatable {
        /// A canned answer about the prompt, streamed in chunks after a think time.
        case scripted(think: TimeSpan, wordsPerChunk: Int, every: TimeSpan)
        /// A local program: the prompt on stdin, its stdout streamed back.
        case command(argv: [String], timeout: TimeSpan)
    }

    public struct Session: Sendable, Equatable {
        public var id: String
        public var pin: String
        public var expiresAt: Instant
    }

    public struct Stats: Sendable, Equatable {
        public var paired = 0
        public var requests = 0
        public var sealed = 0
        public var refused = 0

        public init() {}
    }

    enum Link: Equatable { case disconnected, dialing, challenged, ready }

    enum Timer: Hashable, Sendable { case reconnect, pairing, request(Int) }

    /// A request being answered: its key (sealed), what is left to stream, its program.
    struct Active: Sendable {
        var key: [UInt8]?
        var conversation: String
        var chunks: [String]
        var next = 0
        var every: TimeSpan
        var run: Int?
        var promptTokens: Int
    }

    /// `identitySeed`: the 32 bytes the driver keeps; `seed`: this run's stream (the
    /// pairing key pair, PINs, tokens, nonces come from it).
    public init(config: Config, identitySeed: [UInt8], seed: StreamSeed) throws(CryptoError) {
        self.config = config
        identity = try Ed25519.SigningKey(seed: identitySeed)
        generator = seed.generator()
        keyPair = try X25519.KeyPair(seed: generator.bytes(32))
    }

    public var identityKey: [UInt8] { identity.publicKey }
    public var isConnected: Bool { link == .ready }
    public var nextDeadline: Instant? { timers.nextDeadline }

    public mutating func handle(_ input: DaemonInput, now: Instant) -> [DaemonEffect] {
        var out: [DaemonEffect] = []
        switch input {
        case .start:
            asleep = false
            dial(&out)
        case .tunnelOpened:
            link = .dialing
        case .tunnelText(let text):
            received(text, now: now, &out)
        case .tunnelClosed:
            lost(now: now, &out)
        case .timerFired:
            for timer in timers.popExpired(now: now) { fire(timer, now: now, &out) }
        case .openPairing:
            openPairing(now: now, &out)
        case .sleep:
            asleep = true
            timers.cancel(.reconnect)
            if link != .disconnected { out.append(.disconnect) }
            link = .disconnected
            dropRequests(&out)
        case .backendOutput(let run, let text):
            guard let id = requests.first(where: { $0.value.run == run })?.key, !text.isEmpty else { break }
            out.append(.send(TunnelMessage.streamChunk(requestID: id, data: frame(["text": .string(text)], requests[id]!.key)).text))
        case .backendFinished(let run, let status, let reason):
            guard let id = requests.first(where: { $0.value.run == run })?.key else { break }
            let active = requests.removeValue(forKey: id)!
            if status == 0 {
                out.append(.send(TunnelMessage.streamEnd(requestID: id, data: frame(["conversation_id": .string(active.conversation)], active.key)).text))
            } else {
                out.append(.send(TunnelMessage.streamError(requestID: id, error: "provider_failed",
                                                           message: "the model program failed" + (reason.map { " (\($0))" } ?? "")).text))
            }
        }
        return out
    }

    mutating func dial(_ out: inout [DaemonEffect]) {
        guard !asleep, link == .disconnected else { return }
        link = .dialing
        out.append(.connect)
    }

    /// The tunnel went away: requests end (the relay tells their phones), and, unless the
    /// desktop sleeps, the daemon dials again after a jittered backoff.
    mutating func lost(now: Instant, _ out: inout [DaemonEffect]) {
        let was = link
        link = .disconnected
        dropRequests(&out)
        guard !asleep, was != .disconnected || link == .disconnected else { return }
        reconnectAttempts += 1
        var delay = config.reconnectBase
        for _ in 1..<max(1, min(reconnectAttempts, 20)) where delay < config.reconnectMax { delay = delay * 2 }
        delay = min(delay, config.reconnectMax)
        let jitter = 500 + Int64(generator.next(below: 1_001))
        timers.arm(.reconnect, at: now + .nanoseconds(delay.nanoseconds / 1_000 * jitter))
    }

    mutating func dropRequests(_ out: inout [DaemonEffect]) {
        for id in requests.keys.sorted() {
            if let run = requests[id]?.run { out.append(.stopCommand(run: run)) }
            timers.cancel(.request(id))
        }
        requests = [:]
    }

    mutating func fire(_ timer: Timer, now: Instant, _ out: inout [DaemonEffect]) {
        switch timer {
        case .reconnect:
            dial(&out)
        case .pairing:
            guard let session, session.expiresAt <= now else { break }
            self.session = nil
            if link == .ready { out.append(.send(TunnelMessage.pairingClose(sessionID: session.id).text)) }
            out.append(.pairingClosed(reason: "expired"))
            if config.keepPairingOpen { openPairing(now: now, &out) }
        case .request(let id):
            stream(id, now: now, &out)
        }
    }

    /// A new pairing session: a 6-digit PIN from the stream (the CSPRNG live), valid for
    /// `pairingLifetime`; the relay learns it when the tunnel is up.
    mutating func openPairing(now: Instant, _ out: inout [DaemonEffect]) {
        let pin = String(100_000 + generator.next(below: 900_000))
        let created = Session(id: UUIDText.random(using: &generator), pin: pin, expiresAt: now + config.pairingLifetime)
        session = created
        timers.arm(.pairing, at: created.expiresAt)
        out.append(.pairingOffered(pin: pin, expiresAt: created.expiresAt))
        if link == .ready { out.append(.send(TunnelMessage.pairingOpen(sessionID: created.id, pin: pin, expiresAt: 0).text)) }
    }

    /// A frame's data: sealed under the request's key when it came sealed.
    mutating func frame(_ data: JSONValue, _ key: [UInt8]?) -> JSONValue {
        guard let key else { return data }
        return BridgeSeal.sealReply(data, key: key, nonce: generator.bytes(24))
    }
}

public enum DaemonInput: Sendable {
    /// Dial the relay (the desktop app starts, or wakes).
    case start
    case tunnelOpened
    case tunnelText(String)
    case tunnelClosed
    case timerFired
    /// The user asks for a PIN to pair a phone.
    case openPairing
    /// The laptop's lid closes: the tunnel drops and the daemon stops dialing until `start`.
    case sleep
    case backendOutput(run: Int, text: String)
    case backendFinished(run: Int, status: Int32, reason: String?)
}

public enum DaemonEffect: Sendable, Equatable {
    /// Open the tunnel (a WebSocket to the relay's `/v1/tunnel`).
    case connect
    case send(String)
    case disconnect
    /// Run a command-provider program with the prompt on stdin.
    case startCommand(run: Int, argv: [String], input: String, timeout: TimeSpan)
    case stopCommand(run: Int)
    /// Show this PIN to the user (until `expiresAt`).
    case pairingOffered(pin: String, expiresAt: Instant)
    case pairingClosed(reason: String)
    /// A phone paired.
    case paired(deviceID: String)
    /// The relay refused the tunnel (its close reason).
    case refused(reason: String)
}
