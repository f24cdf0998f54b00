import AgentRuntimeClient
import AgentRuntimeWire
import Foundation
import LabKernel
import Live
import Synchronization

/// A virtual phone of a load test on the agent runtime: the agent client core the
/// simulator runs, on real sockets (`LiveAgentPhone`). Each iteration is one chat as a user
/// has it: the app discovers the workflows, starts a chat (a fresh `client_request_id`) and
/// opens its socket; the user types, answers every tool call (a composer prompt with text,
/// any other with an approval) and every input request, up to `inputsPerChat` inputs; the
/// iteration ends when the run completes or the user has typed them all and the agent
/// waits again. Every HTTP exchange is recorded by route (the first of the iteration from
/// its intended start), and `agent.first_chunk` from each input to the agent's first text.
final class AgentLoadPhone: Sendable {
    let base: String
    let identity: AgentIdentity
    let http: HTTPClient
    /// Workflows and their weights; empty: the runtime's entry point.
    let mix: [(name: String, weight: Double)]
    let inputsPerChat: Int
    let seed: StreamSeed
    let requestTimeout: Duration
    /// How long one chat may take before it counts failed.
    let chatDeadline: Duration
    let chats = Mutex<UInt64>(0)

    init(base: String, identity: AgentIdentity, http: HTTPClient, mix: [(name: String, weight: Double)], inputsPerChat: Int, seed: StreamSeed,
         requestTimeout: Duration) {
        self.base = base
        self.identity = identity
        self.http = http
        self.mix = mix
        self.inputsPerChat = max(1, inputsPerChat)
        self.seed = seed
        self.requestTimeout = requestTimeout
        chatDeadline = requestTimeout * 6
    }

    /// One chat meant to start at `intended`. Returns whether it went through without a
    /// failure, the agent answering every input.
    func iterate(intended: ContinuousClock.Instant, clock: ContinuousClock, recorder: LoadRecorder) async -> Bool {
        let number = chats.withLock { count in
            count += 1
            return count
        }
        var draw = seed.child(number).generator()
        let workflow = pick(&draw)
        let opening = Mutex(true)
        let failures = Mutex(0)
        let phone: LiveAgentPhone
        do {
            phone = try LiveAgentPhone(base: base, client: AgentClient(snapshot: .init(appID: identity.appID, userID: identity.userID, token: identity.token,
                                                                                         seed: seed.child(number).child("client"))),
                                       http: http, requestTimeout: requestTimeout, failing: Self.failing, exchanged: { request, took, failure in
                // The chat's first request counts from the intended start (no coordinated omission).
                let first = opening.withLock { first in
                    defer { first = false }
                    return first
                }
                recorder.request(AgentRoute.template(request), stack: "agent", latency: first ? clock.now - intended : took, failure: failure)
                if failure != nil { failures.withLock { $0 += 1 } }
            })
        } catch {
            recorder.request("GET /api/workflows", stack: "agent", latency: clock.now - intended, failure: ExchangeFailure.reason(error))
            return false
        }
        let watchdog = Task { [chatDeadline] in
            try? await Task.sleep(for: chatDeadline)
            guard !Task.isCancelled else { return }
            await phone.stop()
        }
        await phone.feed(.start(workflow: workflow))
        var inputs = 0, inputAt: ContinuousClock.Instant?, answered = true, ok = false
        func type() async {
            inputs += 1
            inputAt = clock.now
            answered = false
            await phone.feed(.submit(text: "load test \(number), input \(inputs)"))
        }
        effects: for await effect in phone.effects {
            switch effect {
            case .resumed:
                if inputs == 0 { await type() }
            case .applied(let event, let replayed):
                if !replayed, event.type == .text, event.data["source"] == "agent", let at = inputAt {
                    recorder.firstChunk(clock.now - at, stack: "agent")
                    inputAt = nil
                    answered = true
                }
            case .toolCall(let prompt):
                if prompt.display == "composer" {
                    if inputs < inputsPerChat { await type() } else { ok = answered; break effects }
                } else {
                    await phone.feed(.respond(toolCallID: prompt.id, response: ["text": "ok", "approved": true]))
                }
            case .inputRequested:
                if inputs < inputsPerChat && answered { await type() } else { ok = answered; break effects }
            case .runCompleted:
                ok = true
                break effects
            case .authRequired:
                recorder.request("socket /ws/{workflow}/{app}/{chat}/{user}", stack: "agent", latency: clock.now - intended, failure: "auth refused")
                break effects
            case .surfaced(let error):
                // The chat could not start (its discovery or start was refused, or no
                // workflow is listed): it failed, now rather than at its deadline. Errors
                // within a running chat leave it to go on, as the app's user would.
                if Self.endsChat(error) { break effects }
            case .chatReady, .toolCallResolved, .uploaded, .request, .openSocket, .socketSend, .closeSocket:
                break
            }
        }
        watchdog.cancel()
        await phone.stop()
        return ok && failures.withLock { $0 } == 0
    }

    /// Every status from 400 counts as a failed request but 401 and 403, which the client
    /// reports as a refused token (counted once, as `auth refused`): any other 4xx the
    /// agent client gets (discovering workflows, starting a chat) is shown to the user as
    /// an assistant that could not start. A target that is not an agent runtime answers so.
    static let failing: @Sendable (HTTPRequestMessage, Int) -> Bool = { _, status in status >= 400 && status != 401 && status != 403 }

    /// Whether a surfaced error means the chat could not start: discovery or start refused
    /// (`HTTP_…`), or the runtime listing no workflow the phone may chat with.
    static func endsChat(_ error: AgentClientError) -> Bool {
        error.code == "NO_WORKFLOW" || error.code.hasPrefix("HTTP_")
    }

    func pick(_ draw: inout SeededGenerator) -> String? {
        let total = mix.reduce(0) { $0 + $1.weight }
        guard total > 0 else { return nil }
        var point = draw.nextUnit() * total
        for entry in mix {
            point -= entry.weight
            if point < 0 { return entry.name }
        }
        return mix.last?.name
    }
}

/// Who the phone chats as: the token's `app_id` and `user_id`, or made-up ones for a
/// runtime without auth.
public struct AgentIdentity: Sendable, Equatable {
    public var appID: String
    public var userID: String
    public var token: String?

    /// Reads the claims of a runtime JWT (not its signature: the runtime checks that);
    /// nil when `token` is not one.
    public init?(token: String) {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let payload = Base64URL.decode(String(parts[1])), let claims = try? JSONValue.parse(String(decoding: payload, as: UTF8.self)),
              let app = claims["app_id"]?.stringValue, let user = (claims["user_id"] ?? claims["sub"])?.stringValue else { return nil }
        appID = app
        userID = user
        self.token = token
    }

    public init(appID: String, userID: String) {
        self.appID = appID
        self.userID = userID
        token = nil
    }
}
