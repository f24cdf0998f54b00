import Foundation
public import AIBridgeClient
public import LabKernel

/// The AI bridge's phone client core on real sockets and the wall clock: pairing through
/// `HTTPClient`, commands through its streaming call (their answers arrive as Server-Sent
/// Events, fed to the core piece by piece), timers as a task sleeping until
/// `nextDeadline`, and a cancelled request's connection closed. What the core tells the
/// app comes out of `effects`.
public actor LiveBridgePhone {
    public private(set) var client: BridgeClient
    let http: HTTPClient
    var requests: [Int: Task<Void, Never>] = [:]
    let timer = DeadlineTimer()
    let clock = LiveClock()
    let continuation: AsyncStream<BridgeClientEffect>.Continuation
    public nonisolated let effects: AsyncStream<BridgeClientEffect>

    public init(client: BridgeClient, http: HTTPClient) {
        self.client = client
        self.http = http
        (effects, continuation) = AsyncStream<BridgeClientEffect>.makeStream()
    }

    var now: Instant { clock.now }

    public func feed(_ input: BridgeClientInput) {
        let effects = client.handle(input, now: now)
        armTimer()
        for effect in effects {
            switch effect {
            case .request(let id, let request):
                let base = client.baseURL
                requests[id] = Task { [http] in
                    do {
                        if request.path == "/v1/chat" {
                            for try await part in try await http.stream(request, to: base) {
                                switch part {
                                case .head(let status, let headers): await self.feed(.streamHead(id: id, status: status, headers: headers))
                                case .body(let bytes): await self.feed(.streamBody(id: id, bytes))
                                case .end: await self.feed(.streamEnd(id: id))
                                }
                            }
                        } else {
                            await self.feed(.response(id: id, try await http.send(request, to: base, timeout: .seconds(20))))
                        }
                    } catch {
                        if !Task.isCancelled { await self.feed(.transportFailed(id: id)) }
                    }
                    await self.done(id)
                }
            case .cancelRequest(let id):
                requests.removeValue(forKey: id)?.cancel()
            case .started, .keychainChanged, .paired, .chunk, .finished, .failed:
                continuation.yield(effect)
            }
        }
    }

    func done(_ id: Int) { requests[id] = nil }

    func armTimer() {
        timer.arm(client.nextDeadline, now: now) { await self.feed(.timerFired) }
    }

    /// Stops: requests and timers end, `effects` ends.
    public func stop() {
        timer.cancel()
        for task in requests.values { task.cancel() }
        requests = [:]
        continuation.finish()
    }
}
