import AIBridgeClient
import AIBridgeDaemon
import Foundation
import LabKernel
import Live
import Simulator
import Synchronization

/// A virtual phone of a load test on the AI bridge relay, and the desktop it is paired with.
///
/// The relay is the deployment (the seed's Cloudflare Worker, shared by every user); a
/// desktop daemon is a user's own. So each phone brings its desktop: an
/// `AIBridgeDaemonDriver` in the generator, a daemon the relay meets for the first time
/// (its id carries the run's tag, its identity key lives in memory), which dials the
/// relay's tunnel and answers as the scenario's `bridge` settings script it (think time,
/// words per chunk, the gap between chunks). Before the clock starts the desktop connects
/// and offers a PIN, and the phone pairs with it (`POST /v1/pair/confirm`, its token into the
/// keychain). Each iteration is one prompt as a user types it: an `ai_chat` command, sealed
/// to the desktop, its answer streamed back as Server-Sent Events through the relay (or,
/// for `wholeShare` of them, in one response).
///
/// Recorded: `POST /v1/chat` from the iteration's intended start to the answer's end;
/// `bridge.first_chunk` from the intended start to the first chunk; `bridge.requests` and
/// `bridge.latency` by outcome and `bridge.pairings`, `bridge.pairing_time` as the
/// simulator records them. An answer that does not read, whole and in order, as the desktop
/// wrote it fails with the reason `answer garbled`: the relay must pass chunks through
/// untouched under load. Every wait ends by the client core's own deadlines (set to
/// `--request-timeout`), and a watchdog stops a phone whose core fails to.
final class BridgeLoadPhone: Sendable {
    let index: Int
    let desktop: AIBridgeDaemonDriver
    let phone: LiveBridgePhone
    let recorder: LoadRecorder
    let deadline: Duration
    let wholeShare: Ratio
    let seed: StreamSeed
    let prompts = Mutex<UInt64>(0)
    /// From the PIN on the desktop's screen to the phone's confirm.
    static let typing: Duration = .milliseconds(500)

    init(index: Int, relay: String, runTag: String, seed: StreamSeed, settings: BridgeSettings, http: HTTPClient, requestTimeout: Duration,
         recorder: LoadRecorder) throws {
        self.index = index
        self.recorder = recorder
        self.seed = seed
        wholeShare = settings.wholeShare
        deadline = requestTimeout
        var identity = seed.child("desktop-identity").generator()
        desktop = try AIBridgeDaemonDriver(relay: relay, identity: identity.bytes(32), daemonID: "loadtest-\(runTag)-\(index)",
                                           chat: .scripted(think: settings.think, wordsPerChunk: settings.wordsPerChunk, every: settings.every),
                                           tls: http.tls, proxies: http.proxies) { _ in }
        var config = BridgeClient.Config(relayURL: relay)
        let limit = TimeSpan(nanoseconds: requestTimeout.nanoseconds)
        (config.firstAnswer, config.idleLimit, config.pairLimit) = (limit, limit, limit)
        var draw = seed.child("seals").generator()
        config.seal = draw.chance(settings.sealedShare)
        phone = LiveBridgePhone(client: BridgeClient(snapshot: .init(deviceID: "loadtest-\(runTag)-phone-\(index)", seed: seed.child("client")), config: config),
                                http: http)
    }

    /// Starts the desktop and pairs the phone with the PIN it offers; false when the
    /// desktop never offered one or the relay refused, or the run was interrupted (which
    /// records nothing: the targets did not fail).
    func pair(clock: ContinuousClock) async -> Bool {
        desktop.start()
        let began = clock.now
        var pin: String?
        while pin == nil && clock.now < began + deadline {
            guard !Task.isCancelled else { return false }
            if desktop.isConnected { pin = desktop.pin }
            // A server that answers the tunnel's upgrade with a 4xx is not a relay (a wrong
            // port or path): no redial will open it, so the phone stops waiting at once. A
            // 5xx may be a relay starting or behind a proxy, and is waited out.
            if pin == nil, case .refused(let status)? = desktop.dialFailure as? WebSocketClientError, (400..<500).contains(status) { break }
            if pin == nil { try? await clock.sleep(for: .milliseconds(10)) }
        }
        guard let pin else {
            recorder.bridgePaired(outcome: "offline", latency: clock.now - began)
            recorder.request("POST /v1/pair/confirm", stack: "ai-bridge", latency: clock.now - began, failure: Self.offline(desktop.dialFailure))
            return false
        }
        // The user reads the PIN off the desktop and types it. The relay learns the PIN from
        // a frame the desktop sends on its tunnel and does not acknowledge, so a confirm sent
        // the moment the desktop shows it can reach the relay first and be refused, and a
        // few refusals from one address throttle every pairing from it (5 in 15 minutes).
        try? await clock.sleep(for: Self.typing)
        let asked = clock.now
        await phone.feed(.pair(pin: pin))
        let error: BridgeError? = await ended(clock: clock) { effect in
            switch effect {
            case .paired: return .some(nil)
            case .failed(_, let error): return .some(error)
            case .request, .cancelRequest, .started, .keychainChanged, .chunk, .finished: return nil
            }
        } ?? .timedOut
        guard !Task.isCancelled else { return false }
        let outcome = BridgeOutcome.pairing(error)
        recorder.bridgePaired(outcome: outcome, latency: clock.now - asked)
        recorder.request("POST /v1/pair/confirm", stack: "ai-bridge", latency: clock.now - asked, failure: error.map(Self.reason))
        return error == nil
    }

    /// One prompt meant to start at `intended`; true when its answer came back whole.
    func iterate(intended: ContinuousClock.Instant, clock: ContinuousClock) async -> Bool {
        let number = prompts.withLock { count in
            count += 1
            return count
        }
        var draw = seed.child(number).generator()
        let words = 3 + Int(draw.next(below: 20))
        let message = (["prompt-from-load-phone-\(index)"] + Array(repeating: "word", count: words - 1)).joined(separator: " ")
        var payload: [String: JSONValue] = ["conversation_id": .string("c-\(index)"), "message": .string(message)]
        if draw.chance(wholeShare) { payload["stream"] = false }
        await phone.feed(.send(command: "ai_chat", payload: payload))
        var text = "", command: Int?
        let answer: Answer? = await ended(clock: clock) { [recorder] effect in
            switch effect {
            case .started(let id, _): command = id
            case .chunk(let id, let chunk) where id == command:
                if text.isEmpty { recorder.firstChunk(clock.now - intended, stack: "bridge") }
                text += chunk
            case .finished(let id, let value) where id == command:
                return .text(text.isEmpty ? value["reply"]?.stringValue ?? "" : text)
            case .failed(let id, let error) where id == command:
                return .failed(error)
            case .request, .cancelRequest, .keychainChanged, .paired, .chunk, .finished, .failed: break
            }
            return nil
        }
        let latency = clock.now - intended
        let failure: String?
        switch answer {
        case .text(let got)?:
            failure = got == BridgeDaemon.answer(words: words) ? nil : "answer garbled"
            recorder.bridgeAnswered(outcome: BridgeOutcome.request(nil), latency: latency)
        case .failed(let error)?:
            failure = Self.reason(error)
            recorder.bridgeAnswered(outcome: BridgeOutcome.request(error), latency: latency)
        case nil:
            failure = "no answer (the phone stopped)"
            recorder.bridgeAnswered(outcome: BridgeOutcome.request(.timedOut), latency: latency)
        }
        recorder.request("POST /v1/chat", stack: "ai-bridge", latency: latency, failure: failure)
        return failure == nil
    }

    /// How a prompt ended: the answer's text, or the failure the app showed.
    enum Answer {
        case text(String)
        case failed(BridgeError)
    }

    /// Reads the phone's effects until `end` says how the request in flight ended. The core
    /// ends every request by its own deadlines; past twice that, the phone is stopped (its
    /// effects end, nil) and counts as failed from then on.
    func ended<T>(clock: ContinuousClock, _ end: (BridgeClientEffect) -> T?) async -> T? {
        let watchdog = Task { [phone, deadline] in
            try? await clock.sleep(for: deadline * 2 + .seconds(1))
            guard !Task.isCancelled else { return }
            await phone.stop()
        }
        defer { watchdog.cancel() }
        for await effect in phone.effects {
            if let result = end(effect) { return result }
        }
        return nil
    }

    /// Why a desktop offered no PIN: its tunnel's upgrade refused with a status, or it
    /// never connected (nothing answered, or nothing in time).
    static func offline(_ dialFailure: (any Error)?) -> String {
        guard case .refused(let status)? = dialFailure as? WebSocketClientError else { return "desktop never connected" }
        return "desktop tunnel HTTP \(status)"
    }

    /// The reason a failure is counted under in `http.errors{reason}`.
    static func reason(_ error: BridgeError) -> String {
        switch error {
        case .notPaired: return "not paired"
        case .unknownCommand: return "unknown command"
        case .invalidRequest: return "invalid request"
        case .unauthorized: return "HTTP 401 unauthorized"
        case .pairingRefused: return "HTTP 401 PIN refused"
        case .tooManyAttempts: return "HTTP 429 too many attempts"
        case .bridgeOffline: return "HTTP 503 bridge offline"
        case .timedOut: return "timeout"
        case .interrupted: return "answer cut off"
        case .server(let status, let code): return "HTTP \(status) \(code)"
        }
    }

    func stop() async {
        desktop.stop()
        await phone.stop()
    }
}
