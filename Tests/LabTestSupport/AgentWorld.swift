public import AgentRuntimeClient
public import AgentRuntimeServer
public import AgentRuntimeWire
public import LabKernel

/// The agent runtime core and its phones in virtual time, for tests: requests are calls,
/// frames wait in each connection's inbox, wake-ups fire in time order as `advance`
/// moves the clock. Deterministic: no thread, no wall clock.
public struct AgentWorld {
    public var server: AgentServer
    public var now: Instant = .zero + .seconds(1_000)
    var wakeups: [(chat: String, at: Instant, order: Int)] = []
    var order = 0
    public var inbox: [Int: [String]] = [:]
    public var closed: [Int: UInt16] = [:]
    /// Every change the server asked to commit, in order.
    public var committed: [AgentStoreChange] = []
    public var commands: [BackendCommand] = []

    public static let key: [UInt8] = Array("a test key of thirty-two bytes!!".utf8)

    public init(workflows: [AgentWorkflow], authRequired: Bool = true, configure: (inout AgentServerConfig) -> Void = { _ in }) {
        var config = AgentServerConfig()
        config.authRequired = authRequired
        config.tokenKey = Self.key
        config.workflows = workflows
        configure(&config)
        server = AgentServer(config: config, seed: StreamSeed(7), wallClock: .unixEpoch)
    }

    /// A token for `app` and `user`, valid for a day from `now`.
    public func token(app: String, user: String, key: [UInt8] = AgentWorld.key, lifetime: TimeSpan = .days(1)) -> String {
        let seconds = now.nanoseconds / 1_000_000_000
        return RuntimeToken(appID: app, userID: user, issuedAt: seconds, expiresAt: seconds + lifetime.nanoseconds / 1_000_000_000).sign(key: key)
    }

    mutating func absorb(_ reply: AgentReply) {
        committed += reply.changes
        commands += reply.commands
        for output in reply.outputs {
            switch output {
            case .send(let connection, let text): inbox[connection, default: []].append(text)
            case .close(let connection, let code, _): closed[connection] = code
            }
        }
        for wakeup in reply.wakeups {
            order += 1
            wakeups.append((wakeup.chatID, wakeup.at, order))
        }
    }

    public mutating func http(_ request: HTTPRequestMessage) -> HTTPResponseMessage {
        let reply = server.handle(request, now: now)
        absorb(reply)
        return reply.response
    }

    /// A JSON request with a bearer token.
    public mutating func http(_ method: String, _ target: String, token: String?, json: JSONValue? = nil) -> HTTPResponseMessage {
        var headers: [String: String] = [:]
        if let token { headers["authorization"] = "Bearer \(token)" }
        if json != nil { headers["content-type"] = "application/json" }
        return http(HTTPRequestMessage(method: method, target: target, headers: headers, body: json.map { Array($0.canonicalText.utf8) } ?? []))
    }

    /// Opens a socket; nil and the close code when refused.
    public mutating func connect(_ target: String) -> (connection: Int?, refusal: UInt16?) {
        let request = HTTPRequestMessage(method: "GET", target: target)
        switch server.connect(path: request.path, query: request.query, now: now) {
        case .accepted(let id, let reply):
            inbox[id] = []
            absorb(reply)
            return (id, nil)
        case .refused(let code, _):
            return (nil, code)
        }
    }

    public mutating func send(_ connection: Int, _ text: String) { absorb(server.receive(connection, text: text, now: now)) }

    public mutating func disconnect(_ connection: Int) {
        server.disconnect(connection)
        inbox[connection] = nil
    }

    /// The frames waiting for a connection, taken.
    public mutating func take(_ connection: Int) -> [String] {
        defer { inbox[connection] = [] }
        return inbox[connection] ?? []
    }

    /// Moves the clock to `now + span`, firing every wake-up due on the way in time order.
    public mutating func advance(by span: TimeSpan) { advance(to: now + span) }

    public mutating func advance(to end: Instant) {
        while let next = wakeups.filter({ $0.at <= end }).min(by: { ($0.at, $0.order) < ($1.at, $1.order) }) {
            wakeups.removeAll { $0.order == next.order }
            now = max(now, next.at)
            absorb(server.runDue(next.chat, now: now))
        }
        now = max(now, end)
    }

    /// The chat's transcript as envelopes.
    public func transcript(_ chat: String) -> [RuntimeEnvelope] {
        (server.state.transcripts[chat] ?? []).compactMap { RuntimeEnvelope(text: $0) }
    }
}

/// A client core whose runtime is an `AgentWorld`: its effects are carried out at once,
/// frames are delivered by `deliver`, its timers by `AgentWorld.advance` through `tick`.
public struct AgentPhone {
    public var client: AgentClient
    public var connection: Int?
    public var effects: [AgentClientEffect] = []
    /// Whether its link is up: while down, requests fail and sockets do not open.
    public var online = true

    public init(app: String, user: String, token: String?, seed: UInt64) {
        client = AgentClient(snapshot: AgentClient.Snapshot(appID: app, userID: user, token: token, seed: StreamSeed(seed)))
    }

    /// Feeds an input and carries out what it asks, until the client is quiet.
    public mutating func run(_ input: AgentClientInput, in world: inout AgentWorld) {
        var queue = [input]
        while !queue.isEmpty {
            let effects = client.handle(queue.removeFirst(), now: world.now)
            self.effects += effects
            for effect in effects {
                switch effect {
                case .request(let id, let request):
                    queue.append(online ? .response(id: id, world.http(request)) : .transportFailed(id: id))
                case .openSocket(let target):
                    guard online else { queue.append(.socketClosed(code: 1006)); continue }
                    let (connection, refusal) = world.connect(target)
                    self.connection = connection
                    queue.append(connection != nil ? .socketOpened : .socketClosed(code: refusal ?? 1006))
                case .socketSend(let text):
                    if let connection { world.send(connection, text) }
                case .closeSocket:
                    if let connection { world.disconnect(connection) }
                    connection = nil
                case .chatReady, .applied, .toolCall, .toolCallResolved, .inputRequested, .runCompleted, .resumed, .uploaded, .surfaced, .authRequired:
                    break
                }
            }
            if queue.isEmpty, let connection, !(world.inbox[connection] ?? []).isEmpty {
                queue = world.take(connection).map { .socketText($0) }
            }
        }
    }

    /// Delivers waiting frames and due timers.
    public mutating func pump(in world: inout AgentWorld) {
        if let at = client.nextDeadline, at <= world.now { run(.timerFired, in: &world) }
        if let connection, !(world.inbox[connection] ?? []).isEmpty {
            for frame in world.take(connection) { run(.socketText(frame), in: &world) }
        }
    }

    /// The link drops: the socket is gone (the client learns it from the close).
    public mutating func dropSocket(in world: inout AgentWorld) {
        guard let connection else { return }
        world.disconnect(connection)
        self.connection = nil
        run(.socketClosed(code: 1006), in: &world)
    }

    /// Advances the world in small steps, pumping this phone, for `span`.
    public mutating func live(_ span: TimeSpan, in world: inout AgentWorld, step: TimeSpan = .milliseconds(10)) {
        let end = world.now + span
        while world.now < end {
            world.advance(by: step)
            pump(in: &world)
        }
    }

    /// The applied timeline of the active chat.
    public var timeline: [String] { client.activeChat?.timeline ?? [] }
}
