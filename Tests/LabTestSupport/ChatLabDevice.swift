public import Foundation
public import LabKernel
public import SecureChatClient
public import SecureChatServer

/// A chat client core on one of the two drivers, as a conformance body drives it: feed it
/// inputs (its requests and socket frames are carried out until it is quiet), and pump its
/// socket until something arrives.
public protocol ChatLabDevice: AnyObject {
    var client: ChatClient { get }
    /// Channels the core announced, in order.
    var added: [String] { get }
    func run(_ input: ClientInput) async throws
    /// Feeds socket frames (and a due timer) to the core until `done` or `seconds` pass.
    func pump(until done: () -> Bool, seconds: Double) async throws
    /// Closes the device's socket (before its server stops).
    func close()
}

extension ChatLabDevice {
    public func texts(_ channel: String) -> [String] { client.timeline(channel).map(\.text) }
    public func pump(until done: () -> Bool) async throws { try await pump(until: done, seconds: 10) }
}

/// The wall clock as an instant since the Unix epoch, as the live servers count time.
func wallNow() -> Instant { Instant(nanoseconds: Int64(Date().timeIntervalSince1970 * 1e9)) }

/// A client core driven over real HTTP and a real WebSocket against a served chat server.
public final class LoopbackChatDevice: ChatLabDevice {
    public private(set) var client: ChatClient
    public let base: String
    public let port: Int
    public var socket: WebSocketProbe?
    var timerAt: Instant?
    public private(set) var delivered: [ChatClientMessage] = []
    public private(set) var surfaced: [ClientError] = []
    public private(set) var added: [String] = []

    public init(base: String, seed: UInt64) {
        self.base = base
        port = Int(base.split(separator: ":").last!)!
        client = ChatClient(snapshot: ChatClient.Snapshot(seed: StreamSeed(seed)))
    }

    public func run(_ input: ClientInput) async throws {
        var queue = [input]
        while !queue.isEmpty {
            let next = queue.removeFirst()
            for effect in client.handle(next, now: wallNow()) {
                switch effect {
                case .request(let id, let request):
                    do {
                        let target = request.path + (request.query.isEmpty ? "" : "?" + request.query.map { "\($0.key)=\(PercentEncoding.encode($0.value))" }.joined(separator: "&"))
                        let reply = try await HTTPProbe.request(request.method, base + target, body: request.body.isEmpty ? nil : Data(request.body),
                                                                headers: request.headers)
                        let headers = reply.headers.map { HTTPHeader($0.key, $0.value) }
                        queue.append(.response(id: id, HTTPResponseMessage(status: reply.status, headers: headers, body: Array(reply.body))))
                    } catch {
                        queue.append(.transportFailed(id: id))
                    }
                case .openSocket(let ticket):
                    // The handshake and the polls below wait off the cooperative pool, as
                    // the agent and desktop lab devices' do (`offPool`).
                    let port = port
                    socket = try? await offPool { try WebSocketProbe(port: port, target: "/ws?ticket=\(ticket)") }
                    queue.append(socket == nil ? .socketClosed(code: 1006) : .socketOpened)
                case .socketSend(let text): try socket?.send(text)
                case .closeSocket: socket = nil
                case .delivered(let message): delivered.append(message)
                case .channelAdded(let id): added.append(id)
                case .surfaced(let error): surfaced.append(error)
                case .loggedOut: socket = nil
                case .channelRemoved, .invited, .typing, .presence, .historyLoaded: break
                }
            }
            timerAt = client.nextDeadline
        }
    }

    public func pump(until done: () -> Bool, seconds: Double) async throws {
        let deadline = Date().addingTimeInterval(seconds)
        while !done() && Date() < deadline {
            if let at = timerAt, wallNow() >= at {
                timerAt = nil
                try await run(.timerFired)
            }
            guard let probe = socket else {
                try await Task.sleep(for: .milliseconds(20))
                continue
            }
            switch try await offPool({ try probe.receive(timeout: 0.05) }) {
            case .text(let text)?: try await run(.socketText(text))
            case .close(let code)?:
                socket = nil
                try await run(.socketClosed(code: code))
            case nil: break
            }
        }
    }

    public func close() { socket = nil }
}

/// The chat server core in process, shared by `InProcessChatDevice`s: requests are a
/// function call, socket frames wait in each connection's inbox.
public final class InProcessChatHub: @unchecked Sendable {
    // Unchecked: every field is touched under `lock`.
    let lock = NSLock()
    public private(set) var server: ChatServer
    var inbox: [Int: [String]] = [:]
    var closed: [Int: UInt16] = [:]

    public init(server: ChatServer) { self.server = server }

    func handle(_ request: HTTPRequestMessage) -> HTTPResponseMessage {
        lock.withLock {
            let reply = server.handle(request, now: wallNow())
            route(reply.outputs)
            return reply.response
        }
    }

    func connect(ticket: String) -> Int? {
        lock.withLock {
            guard case .accepted(let connection) = server.connect(ticket: ticket, now: wallNow()) else { return nil }
            inbox[connection] = []
            return connection
        }
    }

    func receive(_ connection: Int, text: String) { lock.withLock { route(server.receive(connection, text: text, now: wallNow())) } }

    func disconnect(_ connection: Int) { lock.withLock { server.disconnect(connection) } }

    func route(_ outputs: [ChatOutput]) {
        for output in outputs {
            switch output {
            case .send(let connection, let payload): inbox[connection, default: []].append(payload.canonicalText)
            case .close(let connection, let code, _): closed[connection] = code
            }
        }
    }

    /// The frames waiting for `connection`, and its close code if the server closed it.
    func take(_ connection: Int) -> (frames: [String], closed: UInt16?) {
        lock.withLock {
            defer { inbox[connection] = [] }
            return (inbox[connection] ?? [], closed.removeValue(forKey: connection))
        }
    }

    public var state: ChatServerState { lock.withLock { server.state } }
}

/// A client core whose server is an `InProcessChatHub`.
public final class InProcessChatDevice: ChatLabDevice {
    public private(set) var client: ChatClient
    let hub: InProcessChatHub
    var connection: Int?
    var timerAt: Instant?
    public private(set) var added: [String] = []

    public init(hub: InProcessChatHub, seed: UInt64) {
        self.hub = hub
        client = ChatClient(snapshot: ChatClient.Snapshot(seed: StreamSeed(seed)))
    }

    public func run(_ input: ClientInput) async throws {
        var queue = [input]
        while !queue.isEmpty {
            for effect in client.handle(queue.removeFirst(), now: wallNow()) {
                switch effect {
                case .request(let id, let request): queue.append(.response(id: id, hub.handle(request)))
                case .openSocket(let ticket):
                    connection = hub.connect(ticket: ticket)
                    queue.append(connection == nil ? .socketClosed(code: 4001) : .socketOpened)
                case .socketSend(let text): if let connection { hub.receive(connection, text: text) }
                case .closeSocket, .loggedOut: close()
                case .channelAdded(let id): added.append(id)
                case .delivered, .surfaced, .channelRemoved, .invited, .typing, .presence, .historyLoaded: break
                }
            }
            timerAt = client.nextDeadline
        }
    }

    public func pump(until done: () -> Bool, seconds: Double) async throws {
        let deadline = Date().addingTimeInterval(seconds)
        while !done() && Date() < deadline {
            if let at = timerAt, wallNow() >= at {
                timerAt = nil
                try await run(.timerFired)
            }
            guard let connection else {
                try await Task.sleep(for: .milliseconds(20))
                continue
            }
            let (frames, closed) = hub.take(connection)
            for frame in frames { try await run(.socketText(frame)) }
            if let closed {
                self.connection = nil
                try await run(.socketClosed(code: closed))
            }
            if frames.isEmpty && closed == nil { try await Task.sleep(for: .milliseconds(5)) }
        }
    }

    public func close() {
        if let connection { hub.disconnect(connection) }
        connection = nil
    }
}
