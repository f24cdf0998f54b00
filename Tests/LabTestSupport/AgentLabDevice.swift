public import AgentRuntimeClient
public import AgentRuntimeServer
public import AgentRuntimeWire
public import Foundation
public import LabKernel

/// An agent runtime client core on one of the two drivers, as a conformance body drives
/// it: inputs carried out until quiet, frames and timers pumped until something holds.
public protocol AgentLabDevice: AnyObject {
    var client: AgentClient { get }
    func run(_ input: AgentClientInput) async throws
    /// Delivers frames and due timers until `done` or `seconds` pass.
    func pump(until done: () -> Bool, seconds: Double) async throws
    /// The link drops under the socket (the client hears a 1006 close).
    func dropSocket() async throws
    func close()
}

extension AgentLabDevice {
    public func pump(until done: () -> Bool) async throws { try await pump(until: done, seconds: 10) }
}

/// The runtime core in process in virtual time: requests are calls, frames wait in each
/// connection's inbox, and a device's pump moves the clock to the next thing due (a
/// server wake-up or its own timer), so a busy test machine cannot starve a scripted
/// turn or reorder it against the phone's timers.
public final class InProcessAgentHub: @unchecked Sendable {
    // Unchecked: every field is touched under `lock`.
    let lock = NSLock()
    var server: AgentServer
    var inbox: [Int: [String]] = [:]
    var wakeups: [AgentWakeup] = []
    /// The virtual clock, from the wall time the hub was made (tokens carry real times).
    var clock: Instant

    public init(server: AgentServer) {
        self.server = server
        clock = wallNow()
    }

    var now: Instant { lock.withLock { clock } }

    /// The earliest server wake-up.
    var nextWakeup: Instant? { lock.withLock { wakeups.map(\.at).min() } }

    func advance(to instant: Instant) { lock.withLock { clock = max(clock, instant) } }

    func absorb(_ reply: AgentReply) {
        for output in reply.outputs {
            if case .send(let connection, let text) = output { inbox[connection, default: []].append(text) }
        }
        wakeups += reply.wakeups
    }

    func handle(_ request: HTTPRequestMessage) -> HTTPResponseMessage {
        lock.withLock {
            let reply = server.handle(request, now: clock)
            absorb(reply)
            return reply.response
        }
    }

    func connect(_ target: String) -> Int? {
        lock.withLock {
            let request = HTTPRequestMessage(method: "GET", target: target)
            guard case .accepted(let id, let reply) = server.connect(path: request.path, query: request.query, now: clock) else { return nil }
            inbox[id] = []
            absorb(reply)
            return id
        }
    }

    func receive(_ connection: Int, _ text: String) { lock.withLock { absorb(server.receive(connection, text: text, now: clock)) } }

    func disconnect(_ connection: Int) {
        lock.withLock {
            server.disconnect(connection)
            inbox[connection] = nil
        }
    }

    /// Fires the wake-ups due by now (the runs go on whether or not a socket listens).
    func fireDue() {
        lock.withLock {
            let now = clock
            let due = wakeups.filter { $0.at <= now }
            wakeups.removeAll { $0.at <= now }
            for wakeup in due { absorb(server.runDue(wakeup.chatID, now: now)) }
        }
    }

    /// Takes a connection's frames.
    func take(_ connection: Int) -> [String] {
        lock.withLock {
            defer { inbox[connection] = [] }
            return inbox[connection] ?? []
        }
    }

    public var transcripts: [String: [String]] { lock.withLock { server.state.transcripts } }
}

/// Shared by both drivers: feed effects, keep the timer, on the driver's clock.
open class AgentDeviceBase {
    public private(set) var client: AgentClient
    var timerAt: Instant?
    let clock: () -> Instant

    init(app: String, user: String, token: String?, seed: UInt64, clock: @escaping () -> Instant) {
        client = AgentClient(snapshot: AgentClient.Snapshot(appID: app, userID: user, token: token, seed: StreamSeed(seed)))
        self.clock = clock
    }

    func feed(_ input: AgentClientInput) -> [AgentClientEffect] {
        let effects = client.handle(input, now: clock())
        timerAt = client.nextDeadline
        return effects
    }

    func timerDue() -> Bool {
        guard let at = timerAt, clock() >= at else { return false }
        timerAt = nil
        return true
    }
}

public final class InProcessAgentDevice: AgentDeviceBase, AgentLabDevice {
    let hub: InProcessAgentHub
    var connection: Int?
    /// Frames the hub sent that the device has not read yet.
    var unread: [String] = []

    public init(hub: InProcessAgentHub, app: String, user: String, token: String?, seed: UInt64) {
        self.hub = hub
        super.init(app: app, user: user, token: token, seed: seed) { hub.now }
    }

    public func run(_ input: AgentClientInput) async throws {
        var queue = [input]
        while !queue.isEmpty {
            for effect in feed(queue.removeFirst()) {
                switch effect {
                case .request(let id, let request): queue.append(.response(id: id, hub.handle(request)))
                case .openSocket(let target):
                    connection = hub.connect(target)
                    queue.append(connection == nil ? .socketClosed(code: 1008) : .socketOpened)
                case .socketSend(let text): if let connection { hub.receive(connection, text) }
                case .closeSocket: close()
                case .chatReady, .applied, .toolCall, .toolCallResolved, .inputRequested, .runCompleted, .resumed, .uploaded, .surfaced, .authRequired:
                    break
                }
            }
        }
    }

    public func pump(until done: () -> Bool, seconds: Double) async throws {
        let deadline = hub.now + .nanoseconds(Int64(seconds * 1e9))
        while true {
            // The server's wake-ups due by now come before the phone's own timer.
            hub.fireDue()
            if timerDue() { try await run(.timerFired) }
            if let connection { unread += hub.take(connection) }
            // One frame at a time, as a socket reads them: what is left when `done` holds
            // stays unread (and is lost with the socket if the test drops it next).
            while !unread.isEmpty && !done() { try await run(.socketText(unread.removeFirst())) }
            guard !done() else { return }
            // Nothing to read: on to the next thing due, within the deadline.
            guard unread.isEmpty else { continue }
            let next = [hub.nextWakeup, timerAt].compactMap { $0 }.min()
            guard let next, next <= deadline else { return }
            hub.advance(to: next)
        }
    }

    public func dropSocket() async throws {
        close()
        try await run(.socketClosed(code: 1006))
    }

    public func close() {
        if let connection { hub.disconnect(connection) }
        connection = nil
        unread = []
    }
}

/// A client core over real HTTP and a real WebSocket against a served runtime.
public final class LoopbackAgentDevice: AgentDeviceBase, AgentLabDevice {
    let base: String
    let port: Int
    var socket: WebSocketProbe?

    public init(base: String, app: String, user: String, token: String?, seed: UInt64) {
        self.base = base
        port = Int(base.split(separator: ":").last!)!
        super.init(app: app, user: user, token: token, seed: seed, clock: wallNow)
    }

    public func run(_ input: AgentClientInput) async throws {
        var queue = [input]
        while !queue.isEmpty {
            for effect in feed(queue.removeFirst()) {
                switch effect {
                case .request(let id, let request):
                    do {
                        let reply = try await HTTPProbe.request(request.method, base + request.path, body: request.body.isEmpty ? nil : Data(request.body),
                                                                headers: request.headers)
                        queue.append(.response(id: id, HTTPResponseMessage(status: reply.status, headers: reply.headers.map { HTTPHeader($0.key, $0.value) },
                                                                           body: Array(reply.body))))
                    } catch {
                        queue.append(.transportFailed(id: id))
                    }
                case .openSocket(let target):
                    let port = port
                    socket = try? await offPool { try WebSocketProbe(port: port, target: target) }
                    queue.append(socket == nil ? .socketClosed(code: 1006) : .socketOpened)
                case .socketSend(let text): try socket?.send(text)
                case .closeSocket: socket = nil
                case .chatReady, .applied, .toolCall, .toolCallResolved, .inputRequested, .runCompleted, .resumed, .uploaded, .surfaced, .authRequired:
                    break
                }
            }
        }
    }

    public func pump(until done: () -> Bool, seconds: Double) async throws {
        let deadline = Date().addingTimeInterval(seconds)
        while !done() && Date() < deadline {
            if timerDue() { try await run(.timerFired) }
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

    public func dropSocket() async throws {
        socket = nil
        try await run(.socketClosed(code: 1006))
    }

    public func close() { socket = nil }
}
