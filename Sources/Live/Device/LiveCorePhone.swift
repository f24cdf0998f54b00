import Foundation
public import AgentRuntimeClient
public import LabKernel
public import SecureChatClient

/// A client core that `LiveCorePhone` can run on real sockets: it takes one input at a
/// time with `now`, asks for HTTP requests and one WebSocket through its effects, and says
/// when its next timer is due. The agent runtime's and the chat's client cores are both
/// this shape; each names which of its effects are I/O (`io`) and which are for the app.
public protocol LiveDrivenCore: Sendable {
    associatedtype Input: LiveCoreInput
    associatedtype Effect: Sendable
    mutating func handle(_ input: Input, now: Instant) -> [Effect]
    var nextDeadline: Instant? { get }
    /// What the driver must do for `effect`; nil: the effect is the app's to see.
    static func io(_ effect: Effect) -> LiveCoreIO?
}

/// The inputs a live driver feeds back: answers, the socket's life, the timer.
public protocol LiveCoreInput: Sendable {
    static func response(id: Int, _ response: HTTPResponseMessage) -> Self
    static func transportFailed(id: Int) -> Self
    static var socketOpened: Self { get }
    static func socketText(_ text: String) -> Self
    static func socketClosed(code: UInt16) -> Self
    static var timerFired: Self { get }
}

/// The I/O a client core asks of its driver.
public enum LiveCoreIO: Sendable, Equatable {
    case request(id: Int, HTTPRequestMessage)
    /// Opens the core's socket at `target` (path and query) on the server's host and port.
    case openSocket(target: String)
    case socketSend(String)
    case closeSocket
}

extension AgentClientInput: LiveCoreInput {}
extension AgentClient: LiveDrivenCore {
    public static func io(_ effect: AgentClientEffect) -> LiveCoreIO? {
        switch effect {
        case .request(let id, let request): return .request(id: id, request)
        case .openSocket(let target): return .openSocket(target: target)
        case .socketSend(let text): return .socketSend(text)
        case .closeSocket: return .closeSocket
        case .chatReady, .applied, .toolCall, .toolCallResolved, .inputRequested, .runCompleted, .resumed, .uploaded, .surfaced, .authRequired: return nil
        }
    }
}

extension ClientInput: LiveCoreInput {}
extension ChatClient: LiveDrivenCore {
    public static func io(_ effect: ClientEffect) -> LiveCoreIO? {
        switch effect {
        case .request(let id, let request): return .request(id: id, request)
        case .openSocket(let ticket): return .openSocket(target: "/ws?ticket=\(PercentEncoding.encode(ticket))")
        case .socketSend(let text): return .socketSend(text)
        case .closeSocket: return .closeSocket
        case .delivered, .channelAdded, .channelRemoved, .invited, .typing, .presence, .historyLoaded, .surfaced, .loggedOut: return nil
        }
    }
}

/// The agent runtime's client core on real sockets.
public typealias LiveAgentPhone = LiveCorePhone<AgentClient>
/// The chat's client core (d3chat, end-to-end encrypted) on real sockets.
public typealias LiveChatPhone = LiveCorePhone<ChatClient>

/// A client core on real sockets and the wall clock: its requests go through
/// `HTTPClient`, its socket through `WebSocketClient`, its timers are tasks that sleep
/// until `nextDeadline`. What the core tells the app comes out of `effects`.
///
/// One actor per phone: inputs (the app's, answers, frames, timers) are fed to the core
/// one at a time, in the order they reach it, as the simulator and the tests feed it. A
/// socket that is replaced or closed is forgotten at once: its late frames are dropped.
/// An app kill (`restart`) starts a new incarnation: answers and timers of the old one
/// are dropped when they arrive, as a killed process never sees them.
public actor LiveCorePhone<Core: LiveDrivenCore> {
    public private(set) var client: Core
    /// Bumped by `restart`: what the previous core asked for no longer reaches the new one.
    var incarnation = 0
    let http: HTTPClient
    /// The server, parsed once: every request and socket of the phone goes there.
    let endpoint: HTTPClient.Endpoint
    var socket: WebSocketConnection?
    var socketRun = 0
    let timer = DeadlineTimer()
    let clock = LiveClock()
    let continuation: AsyncStream<Core.Effect>.Continuation
    /// What the core tells the app, as it happens.
    public nonisolated let effects: AsyncStream<Core.Effect>
    /// Hears each HTTP exchange as it ends: the request, its time from the send, and why
    /// it failed (no answer, or a status `failing` counts: `ExchangeFailure`), nil when it
    /// did not. A load test records them.
    let exchanged: (@Sendable (HTTPRequestMessage, Duration, String?) -> Void)?
    /// Which answered requests count as failed exchanges, by their status.
    let failing: @Sendable (HTTPRequestMessage, Int) -> Bool
    /// Each request's deadline.
    let requestTimeout: Duration

    /// `failing`: by default a 5xx or a 429, the statuses a server answers when it cannot
    /// serve; a driver whose core cannot go on after some 4xx (a refused sign-up, a chat
    /// that cannot start) counts those too.
    public init(base: String, client: Core, http: HTTPClient, requestTimeout: Duration = .seconds(20),
                failing: @escaping @Sendable (HTTPRequestMessage, Int) -> Bool = { $1 >= 500 || $1 == 429 },
                exchanged: (@Sendable (HTTPRequestMessage, Duration, String?) -> Void)? = nil) throws {
        endpoint = try HTTPClient.Endpoint(base, requiringPort: true)
        self.client = client
        self.http = http
        self.requestTimeout = requestTimeout
        self.exchanged = exchanged
        self.failing = failing
        (effects, continuation) = AsyncStream<Core.Effect>.makeStream()
    }

    var now: Instant { clock.now }

    /// Feeds the core one input and carries out what it asks.
    public func feed(_ input: Core.Input) {
        let effects = client.handle(input, now: now)
        armTimer()
        for effect in effects {
            guard let io = Core.io(effect) else {
                continuation.yield(effect)
                continue
            }
            switch io {
            case .request(let id, let request):
                Task { [http, endpoint, requestTimeout, exchanged, failing, incarnation] in
                    let answer: Core.Input
                    let sent = ContinuousClock.now
                    let failure: String?
                    do {
                        let response = try await http.send(request, to: endpoint, timeout: requestTimeout)
                        failure = failing(request, response.status) ? ExchangeFailure.reason(status: response.status) : nil
                        answer = .response(id: id, response)
                    } catch {
                        failure = ExchangeFailure.reason(error)
                        answer = .transportFailed(id: id)
                    }
                    exchanged?(request, ContinuousClock.now - sent, failure)
                    await self.answer(answer, incarnation: incarnation)
                }
            case .openSocket(let target):
                socketRun += 1
                let run = socketRun
                Task { [endpoint, http] in
                    do {
                        let connection = try await WebSocketClient.connect(host: endpoint.host, port: endpoint.port, target: target, timeout: .seconds(10),
                                                                           group: http.group, tls: endpoint.secure ? http.tls : nil,
                                                                           proxy: http.proxies.proxy(for: endpoint.host, port: endpoint.port, secure: endpoint.secure))
                        await self.opened(connection, run: run)
                        for await event in connection.events {
                            switch event {
                            case .text(let text): await self.frame(.socketText(text), run: run)
                            case .closed(let code): await self.frame(.socketClosed(code: code), run: run, closes: true)
                            }
                        }
                    } catch {
                        await self.frame(.socketClosed(code: 1006), run: run, closes: true)
                    }
                }
            case .socketSend(let text): socket?.send(text)
            case .closeSocket:
                socketRun += 1
                socket?.close()
                socket = nil
            }
        }
    }

    /// An answer to a request the current incarnation sent (an older one's is dropped).
    func answer(_ input: Core.Input, incarnation: Int) {
        guard incarnation == self.incarnation else { return }
        feed(input)
    }

    func opened(_ connection: WebSocketConnection, run: Int) {
        guard run == socketRun else { return connection.close() }
        socket = connection
        feed(.socketOpened)
    }

    /// A frame or a close of the current socket (an old socket's are dropped).
    func frame(_ input: Core.Input, run: Int, closes: Bool = false) {
        guard run == socketRun else { return }
        if closes { socket = nil }
        feed(input)
    }

    /// The core's next deadline, armed (a later input re-arms it).
    func armTimer() {
        let incarnation = incarnation
        timer.arm(client.nextDeadline, now: now) { await self.answer(.timerFired, incarnation: incarnation) }
    }

    /// The app was killed and launched again: what it held in memory goes (its socket, its
    /// timers, the answers still to come) and `restore` makes what the app's storage gives
    /// back from the core as it was (in the same turn, so nothing it hears in between is
    /// lost from what is stored). The server still answers the old requests; the phone no
    /// longer hears them.
    public func restart(_ restore: @Sendable (Core) -> Core) {
        incarnation += 1
        timer.cancel()
        socketRun += 1
        socket?.close()
        socket = nil
        client = restore(client)
    }

    /// Stops: the socket closes, timers stop, `effects` ends.
    public func stop() {
        timer.cancel()
        socketRun += 1
        socket?.close()
        socket = nil
        continuation.finish()
    }
}
