import Foundation
public import AgentRuntimeClient
public import LabKernel

/// The agent runtime's client core on real sockets and the wall clock: its requests go
/// through `HTTPClient`, its socket through `WebSocketClient`, its timers are tasks that
/// sleep until `nextDeadline`. What the core tells the app comes out of `effects`.
///
/// One actor per phone: inputs (the app's, answers, frames, timers) are fed to the core
/// one at a time, in the order they reach it, as the simulator and the tests feed it.
public actor LiveAgentPhone {
    public private(set) var client: AgentClient
    let http: HTTPClient
    let base: String
    let host: String
    let port: Int
    var socket: WebSocketConnection?
    var socketRun = 0
    let timer = DeadlineTimer()
    let clock = LiveClock()
    let continuation: AsyncStream<AgentClientEffect>.Continuation
    /// What the core tells the app, as it happens.
    public nonisolated let effects: AsyncStream<AgentClientEffect>
    /// Hears each HTTP exchange as it ends: the request, its time from the send, and
    /// whether it failed (no answer, or a 5xx). A load test records them.
    let exchanged: (@Sendable (HTTPRequestMessage, Duration, Bool) -> Void)?
    /// Each request's deadline.
    let requestTimeout: Duration

    public init(base: String, client: AgentClient, http: HTTPClient, requestTimeout: Duration = .seconds(20),
                exchanged: (@Sendable (HTTPRequestMessage, Duration, Bool) -> Void)? = nil) throws {
        guard let url = URL(string: base), url.scheme == "http", let host = url.host, let port = url.port else { throw HTTPClientError.badURL(base) }
        self.base = base
        self.host = host
        self.port = port
        self.client = client
        self.http = http
        self.requestTimeout = requestTimeout
        self.exchanged = exchanged
        (effects, continuation) = AsyncStream<AgentClientEffect>.makeStream()
    }

    var now: Instant { clock.now }

    /// Feeds the core one input and carries out what it asks.
    public func feed(_ input: AgentClientInput) {
        let effects = client.handle(input, now: now)
        armTimer()
        for effect in effects {
            switch effect {
            case .request(let id, let request):
                Task { [http, base, requestTimeout, exchanged] in
                    let answer: AgentClientInput
                    let sent = ContinuousClock.now
                    do { answer = .response(id: id, try await http.send(request, to: base, timeout: requestTimeout)) } catch { answer = .transportFailed(id: id) }
                    if let exchanged {
                        let failed: Bool
                        if case .response(_, let response) = answer { failed = response.status >= 500 } else { failed = true }
                        exchanged(request, ContinuousClock.now - sent, failed)
                    }
                    await self.feed(answer)
                }
            case .openSocket(let target):
                socketRun += 1
                let run = socketRun
                Task { [host, port] in
                    do {
                        let connection = try await WebSocketClient.connect(host: host, port: port, target: target)
                        await self.opened(connection, run: run)
                        for await event in connection.events {
                            switch event {
                            case .text(let text): await self.frame(.socketText(text), run: run)
                            case .closed(let code): await self.frame(.socketClosed(code: code), run: run)
                            }
                        }
                    } catch {
                        await self.frame(.socketClosed(code: 1006), run: run)
                    }
                }
            case .socketSend(let text): socket?.send(text)
            case .closeSocket:
                socketRun += 1
                socket?.close()
                socket = nil
            case .chatReady, .applied, .toolCall, .toolCallResolved, .inputRequested, .runCompleted, .resumed, .uploaded, .surfaced, .authRequired:
                continuation.yield(effect)
            }
        }
    }

    func opened(_ connection: WebSocketConnection, run: Int) {
        guard run == socketRun else { return connection.close() }
        socket = connection
        feed(.socketOpened)
    }

    /// A frame or a close of the current socket (an old socket's are dropped).
    func frame(_ input: AgentClientInput, run: Int) {
        guard run == socketRun else { return }
        if case .socketClosed = input { socket = nil }
        feed(input)
    }

    /// The core's next deadline, armed (a later input re-arms it).
    func armTimer() {
        timer.arm(client.nextDeadline, now: now) { await self.feed(.timerFired) }
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
