public import DesktopBridgeWire
public import LabKernel

/// The phone side of the desktop bridge (seed 004's `MobileWebSocketClient` and
/// `JSONRPCRequestManager`) as a sans-I/O core, in either ACP dialect.
///
/// Theory of operation. The app feeds intents (`connect`, `newSession`, `prompt`,
/// `cancel`, `setMode`); the driver feeds the socket (`socketOpened`, `socketText`,
/// `socketClosed`) and `timerFired` at `nextDeadline`. The core answers with
/// `DesktopClientEffect`s. After the socket opens it sends `initialize` and waits for the
/// answer within the seed's handshake timeout (3 s the first time, 10 s on retries); only
/// then is it connected and sends what the app asked meanwhile. Every request has an id
/// and a deadline; a request past its deadline fails `timedOut` and its late answer is
/// dropped. A lost socket is dialled again after 1 s doubling to 30 s, at most
/// `maxAttempts` times in a row, then the client gives up until `connect`.
///
/// The timeline: each `session/update` carries `_meta.seq`, its place in the session's
/// history on the desktop. The client applies an update only if it is the next one it
/// expects for the session; on (re)connect it fetches `tinyvex/history.sessionTimeline`
/// for every session it knows, replaces each timeline with the desktop's, and keeps
/// updates that arrive meanwhile only when they come after it. So no update is shown
/// twice, and a gap (updates missed while away) is filled from history.
public struct DesktopClient: Sendable {
    public var config: Config
    public internal(set) var link: Link = .idle
    /// Each session's timeline, in history order.
    public internal(set) var timelines: [String: [SessionNotification]] = [:]
    /// The desktop's working directory, from `initialize`.
    public internal(set) var workingDirectory: String?
    var generator: SeededGenerator
    var nextID = 1
    var inFlight: [Int: InFlight] = [:]
    /// Intents made before the handshake finished, sent after it.
    var queued: [(id: Int, method: String, params: JSONValue, intent: Intent)] = []
    var timers = TimerTable<Timer>()
    var attempts = 0
    var handshakes = 0
    public internal(set) var stats = Stats()

    public struct Config: Sendable, Equatable {
        public var dialect: ACPDialect
        public var firstHandshake: TimeSpan = .seconds(3)
        public var laterHandshake: TimeSpan = .seconds(10)
        public var maxAttempts = 5
        public var backoffBase: TimeSpan = .seconds(1)
        public var backoffMax: TimeSpan = .seconds(30)
        public var requestDeadline: TimeSpan = .seconds(30)
        /// A current-dialect prompt is answered when its turn ends.
        public var turnDeadline: TimeSpan = .minutes(10)
        public var clientName = "fleetlab-phone"

        public init(dialect: ACPDialect) { self.dialect = dialect }
    }

    public enum Link: Sendable, Equatable {
        case idle
        case opening
        case handshaking(id: Int)
        case connected
        case waiting
        case gaveUp
    }

    public struct Stats: Sendable, Equatable {
        public var connects = 0
        public var reconnects = 0
        public var rebuilds = 0
        public var applied = 0
        public var skipped = 0
        public var timeouts = 0
        public var failures = 0

        public init() {}
    }

    /// What a request was for, so its answer lands in the right place.
    public enum Intent: Sendable, Equatable {
        case initialize
        case newSession
        case prompt(session: String)
        case cancel(session: String)
        case setMode(session: String)
        case recent
        case timeline(session: String)
        case call(String)
    }

    struct InFlight: Sendable {
        var intent: Intent
        var deadline: Instant
    }

    enum Timer: Hashable, Sendable {
        case handshake
        case reconnect
        case deadlines
    }

    public init(config: Config, seed: StreamSeed) {
        self.config = config
        generator = seed.generator()
    }

    public var isConnected: Bool { link == .connected }
    public var nextDeadline: Instant? { timers.nextDeadline }
    public var pendingRequests: Int { inFlight.count + queued.count }

    /// The words of a session's timeline so far, as a phone would render them: one line
    /// per update kind and its text.
    public func transcript(_ session: String) -> [String] {
        (timelines[session] ?? []).map { Self.line($0.update) }
    }

    public static func line(_ update: SessionUpdate) -> String {
        switch update {
        case .userMessageChunk(let text): return "user: \(text)"
        case .agentMessageChunk(let text): return "agent: \(text)"
        case .agentThoughtChunk(let text): return "thought: \(text)"
        case .plan(let entries): return "plan: " + entries.map(\.content).joined(separator: " | ")
        case .toolCall(let id, let title, _, _): return "tool \(id): \(title)"
        case .toolCallUpdate(let id, let status, let output): return "tool \(id) \(status.rawValue): \(output ?? "")"
        case .currentModeUpdate(let mode): return "mode: \(mode)"
        }
    }
}

public enum DesktopClientInput: Sendable, Equatable {
    case connect
    case socketOpened
    case socketText(String)
    case socketClosed
    /// The app leaves the screen: the socket closes, requests in flight fail, nothing
    /// dials again until `connect`. The timelines stay (the app's store keeps them).
    case suspend
    case timerFired
    case newSession(cwd: String?)
    case prompt(session: String, text: String)
    case cancel(session: String, asRequest: Bool)
    case setMode(session: String, mode: String)
    /// Rebuild every known timeline from history (also done after each handshake).
    case refresh
    /// Any other method (history titles, files), answered as `.answered`.
    case call(method: String, params: JSONValue)
}

public enum DesktopClientEffect: Sendable, Equatable {
    case openSocket
    case send(String)
    case closeSocket
    case connected(workingDirectory: String?)
    case sessionCreated(String)
    /// A session's timeline changed (updates applied, or rebuilt from history).
    case timelineChanged(session: String)
    /// A rebuild from history finished for a session.
    case rebuilt(session: String, updates: Int)
    /// A current-dialect prompt's turn ended.
    case turnEnded(session: String, stopReason: String)
    case promptAccepted(session: String)
    case answered(method: String, result: JSONValue)
    case failed(DesktopClientError)
    case gaveUp
}

public enum DesktopClientError: Sendable, Equatable {
    case rpc(intent: DesktopClient.Intent, code: Int, message: String)
    case timedOut(DesktopClient.Intent)
    case handshakeFailed(String)
    case disconnected(DesktopClient.Intent)
}
