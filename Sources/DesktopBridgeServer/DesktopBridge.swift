public import DesktopBridgeWire
public import LabKernel

/// The desktop side of the OpenAgents bridge (seed 004) as a sans-I/O core: JSON-RPC 2.0
/// over WebSocket with ACP methods, in either dialect, for any number of phones at once.
///
/// Theory of operation. A driver hands in sockets (`connect`, `receive` with each text
/// frame, `disconnect`), expired timers (`expire`), and the results of the work the core
/// cannot do itself: file and terminal operations (`operationFinished`) and a local agent
/// program's output (`agentOutput`, `agentExited`). The core answers with a
/// `DesktopReply`: frames to send, store changes to commit first, operations to run.
///
/// A frame is read strictly (`RPCFrame`): errors get their JSON-RPC codes, notifications
/// are never answered, a batch is answered as one array once its last member is (some
/// members wait for the driver). Until a connection's `initialize`, only `initialize` is
/// served; `initialize` fixes the connection's dialect. Sessions belong to the desktop,
/// not to a connection: every initialized phone receives every session's updates, each
/// in its own dialect, and each update is appended to the session's history first, with
/// its `seq`, so a phone that reconnects rebuilds its timeline from
/// `tinyvex/history.sessionTimeline` and skips what it already has. A turn is played by
/// the session's mode's provider: the scripted one (`DesktopScript`, on timers), or a
/// local agent program spoken to in ACP over stdio (`AgentProgram`).
public struct DesktopBridge: Sendable {
    public var state: DesktopState
    public var config: DesktopConfig
    public let wallClock: WallClockOrigin
    var generator: SeededGenerator
    var connections: [Int: Connection] = [:]
    var nextConnection = 1
    var timers = TimerTable<Timer>()
    /// Running turns by session.
    var turns: [String: Turn] = [:]
    var operations: [Int: Pending] = [:]
    var nextOperation = 1
    var batches: [Int: Batch] = [:]
    var nextBatch = 1
    var programs: [Int: AgentProgram] = [:]
    var nextRun = 1
    var nextToolCall = 1
    public internal(set) var stats = Stats()

    enum Timer: Hashable, Sendable {
        case turn(String)
        case program(Int)
    }

    struct Connection: Sendable {
        var dialect: ACPDialect?
    }

    /// Where an answer goes: straight to a connection, or into a batch's slot.
    enum ReplyTo: Sendable, Equatable {
        case direct(connection: Int, id: RPCID)
        case batch(Int, slot: Int, id: RPCID)

        var connection: Int? { if case .direct(let connection, _) = self { return connection }; return nil }
    }

    struct Batch: Sendable {
        var connection: Int
        var slots: [RPCMessage?]
        var waiting: Int
    }

    /// An operation the driver runs, and how to answer when it ends.
    struct Pending: Sendable {
        var reply: ReplyTo
        var dialect: ACPDialect
        var kind: OperationKind
    }

    enum OperationKind: Sendable { case read, write, terminal }

    public struct Stats: Sendable, Equatable {
        public var frames = 0
        public var errors = 0
        public var prompts = 0
        public var cancelled = 0
        public var updates = 0

        public init() {}
    }

    public init(state: DesktopState = DesktopState(), config: DesktopConfig = DesktopConfig(), seed: StreamSeed, wallClock: WallClockOrigin) {
        self.state = state
        self.config = config
        self.wallClock = wallClock
        generator = seed.generator()
    }

    // MARK: Sockets

    /// A phone connected: its id. Nothing is sent until it speaks.
    public mutating func connect() -> Int {
        let id = nextConnection
        nextConnection += 1
        connections[id] = Connection()
        return id
    }

    /// A phone went away: its pending answers are dropped (their work still ends, unseen);
    /// turns go on, so the history stays whole for when it comes back.
    public mutating func disconnect(_ connection: Int) {
        connections[connection] = nil
        batches = batches.filter { $0.value.connection != connection }
        for (session, turn) in turns where turn.promptReply?.connection == connection { turns[session]?.promptReply = nil }
    }

    public var connectedCount: Int { connections.count }

    /// Whether a turn of `session` is running.
    public func isTurnRunning(_ session: String) -> Bool { turns[session] != nil }

    /// The desktop goes to sleep: every turn ends `cancelled`, every phone is let go (its
    /// socket is the driver's to close). History stays.
    public mutating func sleep(now: Instant) -> DesktopReply {
        var reply = DesktopReply()
        for session in turns.keys.sorted() { _ = cancel(session, now: now, &reply) }
        for connection in connections.keys.sorted() { disconnect(connection) }
        return reply
    }

    public var nextDeadline: Instant? { timers.nextDeadline }

    /// One text frame from a phone.
    public mutating func receive(_ connection: Int, text: String, now: Instant) -> DesktopReply {
        var reply = DesktopReply()
        guard connections[connection] != nil else { return reply }
        stats.frames += 1
        switch RPCFrame(text: text) {
        case .refused(let error):
            stats.errors += 1
            reply.send(connection, .failure(id: .null, error: error))
        case .single(let item):
            if case .answer(let message) = handle(item, connection: connection, reply: { .direct(connection: connection, id: $0) }, now: now, &reply) {
                reply.send(connection, message)
            }
        case .batch(let items):
            let batch = nextBatch
            nextBatch += 1
            var slots: [RPCMessage?] = []
            var waiting = 0
            for item in items {
                let slot = slots.count
                switch handle(item, connection: connection, reply: { .batch(batch, slot: slot, id: $0) }, now: now, &reply) {
                case .answer(let message): slots.append(message)
                case .deferred:
                    slots.append(nil)
                    waiting += 1
                case .silent: break
                }
            }
            // Only notifications: nothing at all goes back.
            guard !slots.isEmpty else { break }
            if waiting == 0 {
                reply.outputs.append(.send(connection: connection, text: JSONValue.array(slots.compactMap { $0?.json }).canonicalText))
            } else {
                batches[batch] = Batch(connection: connection, slots: slots, waiting: waiting)
            }
        }
        return reply
    }

    enum Outcome {
        case answer(RPCMessage)
        /// A notification or a stray response: nothing goes back.
        case silent
        /// The answer comes later, through the `ReplyTo` the call was given.
        case deferred
    }

    /// One message of `connection`'s frame.
    mutating func handle(_ item: RPCItem, connection: Int, reply destination: (RPCID) -> ReplyTo, now: Instant, _ reply: inout DesktopReply) -> Outcome {
        switch item {
        case .invalid(let id, let error):
            stats.errors += 1
            return .answer(.failure(id: id, error: error))
        case .message(.response), .message(.failure):
            return .silent  // the desktop calls nothing on phones: a stray answer is dropped
        case .message(.notification(let method, let params)):
            // Notifications are never answered; session/cancel is the one with an effect.
            if method == "session/cancel", let dialect = connections[connection]?.dialect,
               let session = try? ACPParams(params, dialect: dialect).sessionID {
                _ = cancel(session, now: now, &reply)
            }
            return .silent
        case .message(.request(let id, let method, let params)):
            do throws(RPCError) {
                if method == "initialize" { return .answer(.response(id: id, result: try initialize(connection, params: params))) }
                guard let dialect = connections[connection]?.dialect else { throw RPCError.notInitialized }
                guard let result = try call(method, params: ACPParams(params, dialect: dialect), reply: destination(id), connection: connection, now: now, &reply) else {
                    return .deferred
                }
                return .answer(.response(id: id, result: result))
            } catch {
                stats.errors += 1
                return .answer(.failure(id: id, error: error))
            }
        }
    }

    /// Delivers a late answer: to its connection, or into its batch, sending the batch
    /// once its last slot is filled.
    mutating func answer(_ destination: ReplyTo, _ message: RPCMessage, _ reply: inout DesktopReply) {
        switch destination {
        case .direct(let connection, _):
            guard connections[connection] != nil else { return }
            reply.send(connection, message)
        case .batch(let id, let slot, _):
            guard var batch = batches[id], slot < batch.slots.count, batch.slots[slot] == nil else { return }
            batch.slots[slot] = message
            batch.waiting -= 1
            if batch.waiting == 0 {
                batches[id] = nil
                reply.outputs.append(.send(connection: batch.connection, text: JSONValue.array(batch.slots.compactMap { $0?.json }).canonicalText))
            } else {
                batches[id] = batch
            }
        }
    }

    static func id(of destination: ReplyTo) -> RPCID {
        switch destination {
        case .direct(_, let id), .batch(_, _, let id): return id
        }
    }

    // MARK: Handshake

    /// `initialize`: fixes the connection's dialect (again with the same dialect is
    /// answered the same; with the other, refused).
    mutating func initialize(_ connection: Int, params: JSONValue?) throws(RPCError) -> JSONValue {
        let dialect = try ACPDialect.of(initialize: params)
        if let fixed = connections[connection]?.dialect, fixed != dialect {
            throw .invalidParams("this connection already speaks the \(fixed.rawValue) dialect; reconnect to change it")
        }
        connections[connection]?.dialect = dialect
        let d = dialect
        var meta: [String: JSONValue] = ["working_directory": .string(config.workspace)]
        meta["modes"] = .array(config.modes.map { .string($0.id) })
        return d.object([
            "protocolVersion": d.protocolVersion,
            "agentCapabilities": d.object([
                "loadSession": false,
                "promptCapabilities": d.object(["image": false, "audio": false, "embeddedContext": true]),
                "mcpCapabilities": d.object(["http": false, "sse": false]),
            ]),
            "authMethods": [],
            "agentInfo": d.object(["name": "fleetlab-desktop", "title": "fleetlab desktop bridge", "version": .string(config.version)]),
            "_meta": .object(meta),
        ])
    }
}

/// The desktop's settings: its workspace, modes and script.
public struct DesktopConfig: Sendable {
    /// The directory files and terminals are confined to (absolute), and sessions' default cwd.
    public var workspace = "/workspace"
    public var version = "0.1.0"
    public var modes: [DesktopMode] = DesktopMode.defaults
    public var allowTerminal = false
    public var terminalTimeout: TimeSpan = .seconds(30)
    /// The scripted provider's pacing.
    public var script = DesktopScript()
    /// How long a local agent program may take for one turn.
    public var programTimeout: TimeSpan = .minutes(10)
    /// How many of a session's updates `sessionTimeline` returns at most.
    public var timelineLimit = 5_000

    public init() {}
}

/// A mode a session runs in, and the provider that plays its turns.
public struct DesktopMode: Sendable, Equatable {
    public var id: String
    public var name: String
    public var provider: Provider

    public enum Provider: Sendable, Equatable {
        case scripted
        /// A local program speaking ACP on stdin/stdout.
        case program([String])
        /// A provider whose CLI is not installed: prompts are refused as the original did.
        case unavailable
    }

    public init(id: String, name: String, provider: Provider) {
        self.id = id
        self.name = name
        self.provider = provider
    }

    /// The original's mode ids: the scripted agent, and the two CLIs (not installed
    /// until `--desktop-agent` names a program for them).
    public static let defaults = [
        DesktopMode(id: "default_mode", name: "Scripted agent", provider: .scripted),
        DesktopMode(id: "claude-code", name: "Claude Code", provider: .unavailable),
        DesktopMode(id: "codex", name: "Codex", provider: .unavailable),
    ]
}

/// What one call produced.
public struct DesktopReply: Sendable {
    public var outputs: [DesktopOutput] = []
    public var changes: [DesktopStoreChange] = []
    public var operations: [DesktopOperation] = []

    public init() {}

    mutating func send(_ connection: Int, _ message: RPCMessage) { outputs.append(.send(connection: connection, text: message.text)) }
}

public enum DesktopOutput: Sendable, Equatable {
    case send(connection: Int, text: String)
}

/// Work the driver does for the core, answered with `operationFinished` or, for agent
/// programs, `agentOutput`/`agentExited`.
public enum DesktopOperation: Sendable, Equatable {
    /// Read a file the core resolved inside the workspace; the driver checks the real
    /// path (symlinks) is inside too.
    case readFile(operation: Int, path: String, line: Int?, limit: Int?)
    case writeFile(operation: Int, path: String, content: String)
    case runTerminal(operation: Int, argv: [String], cwd: String, outputLimit: Int, timeout: TimeSpan)
    case startProgram(run: Int, argv: [String], cwd: String)
    case programInput(run: Int, line: String)
    case stopProgram(run: Int)
}
