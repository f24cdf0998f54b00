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
    /// What each device did, in order: `GET /api/v1/users/me`, `socket`, …
    var log: [String: [String]] = [:]
    var seed: UInt64 = 1
    /// When set, the next POST of a message from this device reaches the server but its answer is lost.
    var loseNextPostAnswer: String?

    init() {
        var config = ChatServerConfig()
        config.passwordCost = .minimum
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
            clients[who] = client
            for effect in effects {
                switch effect {
                case .request(let id, let request):
                    log[who, default: []].append("\(request.method) \(request.path)")
                    if offline.contains(who) { queue.append((who, .transportFailed(id: id))); continue }
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
                case .startTimer(let after):
                    timers[who] = now + after
                case .delivered(let message):
                    delivered[who, default: []].append(message)
                case .channelAdded(let id):
                    channelsAdded[who, default: []].append(id)
                case .surfaced(let error):
                    surfaced[who, default: []].append(error)
                case .loggedOut(let reason):
                    loggedOut[who] = reason
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

    /// Moves the clock and fires the timers that fall due.
    mutating func advance(_ span: TimeSpan) {
        now = now + span
        for (who, at) in timers.sorted(by: { $0.key < $1.key }) where at <= now {
            timers[who] = nil
            run(who, .timerFired)
        }
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
}
