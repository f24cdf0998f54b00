import LabCrypto
import LabKernel
@testable import SecureChatClient
@testable import SecureChatServer

/// Client cores wired to the server core in process: requests are answered by
/// `server.handle`, frames go both ways by connection id, timers fire when the clock is
/// advanced. A device can be taken offline (its requests and sockets fail).
struct ChatNetwork {
    var server: ChatServer
    var clients: [String: ChatClient] = [:]
    var now = Instant.zero + .seconds(10)
    var connectionOf: [String: Int] = [:]
    var timers: [String: Instant] = [:]
    var offline: Set<String> = []
    var delivered: [String: [ChatClientMessage]] = [:]
    var surfaced: [String: [ClientError]] = [:]
    var loggedOut: [String: String] = [:]
    var channelsAdded: [String: [String]] = [:]
    var channelsRemoved: [String: [String]] = [:]
    /// Typing, presence, invitations and history pages each device's app was told of.
    var events: [String: [ClientEffect]] = [:]
    /// What each device did, in order: `GET /api/v1/users/me`, `socket`, …
    var log: [String: [String]] = [:]
    /// The message pages each device asked for: their `limit`, and " before" when paging back.
    var pagesAsked: [String: [String]] = [:]
    var seed: UInt64 = 1
    /// When set, the next POST of a message from this device reaches the server but its answer is lost.
    var loseNextPostAnswer: String?
    /// Faults for requests of one device whose path ends with `path`, used `times` times.
    var faults: [Fault] = []

    struct Fault {
        enum Kind {
            /// The request never reaches the server; the device sees a transport failure.
            case transport
            /// The server is not asked; this status comes back.
            case status(Int, retryAfter: Int?)
            /// Neither an answer nor a failure ever comes (only the client's deadline ends it).
            case blackhole
        }
        var who: String
        var path: String
        var kind: Kind
        var times: Int
    }

    /// The fault for this request, if one is armed (and uses it up).
    mutating func fault(_ who: String, _ path: String) -> Fault.Kind? {
        guard let index = faults.firstIndex(where: { $0.who == who && path.hasSuffix($0.path) && $0.times > 0 }) else { return nil }
        faults[index].times -= 1
        return faults[index].kind
    }

    init() {
        var config = ChatServerConfig()
        config.passwordCost = .minimum
        config.allowLegacyPlaintext = true  // a d3chat web client's plaintext group, for history paging
        server = ChatServer(config: config, seed: StreamSeed(5), wallClock: .simulationEpoch)
    }

    mutating func device(_ name: String) {
        seed += 1
        clients[name] = ChatClient(snapshot: ChatClient.Snapshot(seed: StreamSeed(seed)))
    }

    mutating func register(_ name: String, username: String) {
        device(name)
        run(name, .register(username: username, password: "a long password", deviceName: name))
    }

    mutating func login(_ name: String, username: String) {
        device(name)
        run(name, .login(username: username, password: "a long password", deviceName: name))
    }

    /// Feeds an input and everything it causes, across clients and the server, until quiet.
    mutating func run(_ name: String, _ input: ClientInput) {
        var queue: [(String, ClientInput)] = [(name, input)]
        while !queue.isEmpty {
            let (who, next) = queue.removeFirst()
            guard var client = clients[who] else { continue }
            let effects = client.handle(next, now: now)
            timers[who] = client.nextDeadline
            clients[who] = client
            for effect in effects {
                switch effect {
                case .request(let id, let request):
                    log[who, default: []].append("\(request.method) \(request.path)")
                    if request.method == "GET", request.path.hasSuffix("/messages"), let limit = request.query["limit"] {
                        pagesAsked[who, default: []].append(limit + (request.query["before"] == nil ? "" : " before"))
                    }
                    if offline.contains(who) { queue.append((who, .transportFailed(id: id))); continue }
                    switch fault(who, request.path) {
                    case .transport?: queue.append((who, .transportFailed(id: id))); continue
                    case .status(let status, let retryAfter)?:
                        let headers = retryAfter.map { [HTTPHeader("Retry-After", String($0))] } ?? []
                        queue.append((who, .response(id: id, .json(status, ["detail": "injected"], headers: headers))))
                        continue
                    case .blackhole?: continue
                    case nil: break
                    }
                    let reply = server.handle(request, now: now)
                    queue += route(reply.outputs)
                    if loseNextPostAnswer == who, request.method == "POST", request.path.hasSuffix("/messages") {
                        loseNextPostAnswer = nil
                        queue.append((who, .transportFailed(id: id)))
                    } else {
                        queue.append((who, .response(id: id, reply.response)))
                    }
                case .openSocket(let ticket):
                    log[who, default: []].append("socket")
                    if offline.contains(who) { queue.append((who, .socketClosed(code: 1006))); continue }
                    switch server.connect(ticket: ticket, now: now) {
                    case .accepted(let connection):
                        connectionOf[who] = connection
                        queue.append((who, .socketOpened))
                    case .refused(let code, _):
                        queue.append((who, .socketClosed(code: code)))
                    }
                case .socketSend(let text):
                    if let connection = connectionOf[who] { queue += route(server.receive(connection, text: text, now: now)) }
                case .closeSocket:
                    if let connection = connectionOf.removeValue(forKey: who) { server.disconnect(connection) }
                case .delivered(let message):
                    delivered[who, default: []].append(message)
                case .channelAdded(let id):
                    channelsAdded[who, default: []].append(id)
                case .surfaced(let error):
                    surfaced[who, default: []].append(error)
                case .loggedOut(let reason):
                    loggedOut[who] = reason
                case .channelRemoved(let id):
                    channelsRemoved[who, default: []].append(id)
                case .typing, .presence, .invited, .historyLoaded:
                    events[who, default: []].append(effect)
                }
            }
        }
    }

    mutating func route(_ outputs: [ChatOutput]) -> [(String, ClientInput)] {
        outputs.compactMap { output in
            switch output {
            case .send(let connection, let payload):
                guard let who = connectionOf.first(where: { $0.value == connection })?.key else { return nil }
                return (who, .socketText(payload.canonicalText))
            case .close(let connection, let code, _):
                guard let who = connectionOf.first(where: { $0.value == connection })?.key else { return nil }
                connectionOf[who] = nil
                return (who, .socketClosed(code: code))
            }
        }
    }

    /// Moves the clock, firing each device's wake-ups as they fall due (in time order).
    mutating func advance(_ span: TimeSpan) {
        let end = now + span
        while let (who, at) = timers.filter({ $0.value <= end }).min(by: { ($0.value, $0.key) < ($1.value, $1.key) }) {
            now = max(now, at)
            timers[who] = nil
            run(who, .timerFired)
        }
        now = end
    }

    mutating func goOffline(_ name: String) {
        offline.insert(name)
        if let connection = connectionOf.removeValue(forKey: name) {
            server.disconnect(connection)
            run(name, .socketClosed(code: 1006))
        }
    }

    mutating func goOnline(_ name: String) {
        offline.remove(name)
        for _ in 0..<8 where connectionOf[name] == nil { advance(.seconds(31)) }
    }

    func texts(_ name: String, _ channel: String) -> [String] { clients[name]!.timeline(channel).map(\.text) }

    /// A request made by hand with a device's token (another client of the same account).
    mutating func direct(_ name: String, _ method: String, _ path: String, _ body: JSONValue? = nil) -> HTTPResponseMessage {
        var bytes: [UInt8] = []
        body?.write(to: &bytes)
        let reply = server.handle(HTTPRequestMessage(method: method, target: "/api/v1" + path,
                                                     headers: ["authorization": "Bearer \(clients[name]!.snapshot.accessToken ?? "")",
                                                               "content-type": "application/json"], body: bytes), now: now)
        for input in route(reply.outputs) { run(input.0, input.1) }
        return reply.response
    }

    func userID(_ name: String) -> String { clients[name]!.userID! }

    /// alice and bob, each signed in and connected, and a DM between them.
    /// The requests among a client's effects, for tests that answer them one by one.
    static func requests(_ effects: [ClientEffect]) -> [(id: Int, request: HTTPRequestMessage)] {
        effects.compactMap { if case .request(let id, let request) = $0 { (id, request) } else { nil } }
    }

    /// A group `team` that Alice created and added `members` to, each registered first.
    static func team(_ members: [String]) -> (ChatNetwork, String) {
        var net = ChatNetwork()
        for name in ["alice"] + members { net.register(name, username: name) }
        net.run("alice", .createGroup(name: "team"))
        let group = net.channelsAdded["alice"]!.last!
        for name in members { net.run("alice", .addMember(channelID: group, userID: net.userID(name))) }
        return (net, group)
    }

    /// Alice's group with Carol in it, and Alice's first message there.
    static func group(first: String) -> (ChatNetwork, String) {
        var (net, group) = team(["carol"])
        net.run("alice", .send(channelID: group, text: first))
        return (net, group)
    }

    static func pair() -> (ChatNetwork, String) {
        var net = ChatNetwork()
        net.register("alice", username: "alice")
        net.register("bob", username: "bob")
        net.run("alice", .openDM(userID: net.userID("bob")))
        return (net, net.channelsAdded["alice"]!.last!)
    }
}
