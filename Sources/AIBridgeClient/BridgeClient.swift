public import AIBridgeWire
public import LabKernel

/// The Mobile AI Bridge's phone client (seed 001) as a sans-I/O core: pairing by PIN into
/// a keychain, sealed command envelopes, streamed answers, and errors the app shows as a
/// banner, with a deadline on everything so nothing spins forever.
///
/// Theory of operation. The app feeds intents (`pair`, `send`, `cancel`); the driver feeds
/// what the network does to each request, by id: a whole response, or a stream's head,
/// body pieces and end, or a transport failure; and `timerFired` at `nextDeadline`. The
/// core answers with `BridgeClientEffect`s: requests to make (and cancel), the keychain to
/// store, answer chunks, finished answers, failures.
///
/// Pairing posts the PIN with this install's device id; a success replaces the keychain
/// (token, the daemon's X25519 key, the worker URL) in one effect, so re-pairing clears
/// and replaces both items together. A request is sealed to the daemon's key when the
/// keychain has one (`Config.seal`), with a fresh ephemeral key and nonce per request, so
/// the relay reads nothing; the answer's frames open with that request's key. Deadlines:
/// the first answer within `firstAnswer`, then no silence longer than `idleLimit`, and a
/// pairing within `pairLimit`; a request past one is cancelled and fails `timedOut`. A
/// failure never blocks the next request: the app may retry at once. A 401 means the
/// token is gone (the daemon restarted or the phone re-paired elsewhere): the keychain is
/// cleared and the banner says to pair again.
public struct BridgeClient: Sendable {
    public var snapshot: Snapshot
    public var config: Config
    var flights: [Int: Flight] = [:]
    /// A request whose head said it is not a stream: its status and the body so far.
    var pendingStatus: [Int: Int] = [:]
    var pendingBody: [Int: [UInt8]] = [:]
    var nextRequest = 1
    var timers = TimerTable<Timer>()
    public internal(set) var stats = Stats()

    public struct Config: Sendable, Equatable {
        /// The relay to pair with (afterwards, the keychain's worker URL).
        public var relayURL: String
        public var seal = true
        public var firstAnswer: TimeSpan = .seconds(20)
        public var idleLimit: TimeSpan = .seconds(60)
        public var pairLimit: TimeSpan = .seconds(20)

        public init(relayURL: String) { self.relayURL = relayURL }
    }

    public struct Stats: Sendable, Equatable {
        public var paired = 0
        public var finished = 0
        public var failed = 0
        public var timeouts = 0
        public var chunks = 0

        public init() {}
    }

    /// What the phone keeps: its install's id, and the keychain's two items.
    public struct Snapshot: Sendable, Codable, Equatable {
        public var deviceID: String
        public var keychain: Keychain?
        public var generator: SeededGenerator

        public init(deviceID: String, seed: StreamSeed) {
            self.deviceID = deviceID
            generator = seed.generator()
        }
    }

    /// The Keychain items pairing stores: the bearer token and the daemon's public key
    /// (with where to reach it).
    public struct Keychain: Sendable, Codable, Equatable {
        public var token: String
        public var serverPublicKey: [UInt8]
        public var workerURL: String
        public var daemonID: String
    }

    struct Flight: Sendable {
        enum Purpose: Sendable { case pair, command(String) }
        var purpose: Purpose
        var key: [UInt8]?
        var deadline: Instant
        var streaming = false
        var parser = ServerSentEvents.Parser()
    }

    enum Timer: Hashable, Sendable { case deadlines }

    public init(snapshot: Snapshot, config: Config) {
        self.snapshot = snapshot
        self.config = config
    }

    public var isPaired: Bool { snapshot.keychain != nil }
    public var nextDeadline: Instant? { timers.nextDeadline }
    public var inFlight: Int { flights.count }
    /// Where requests go: the worker URL pairing gave, else the relay.
    public var baseURL: String { snapshot.keychain?.workerURL ?? config.relayURL }
}

public enum BridgeClientInput: Sendable {
    case pair(pin: String)
    /// A command; its id comes back in `.started`.
    case send(command: String, payload: [String: JSONValue])
    case cancel(id: Int)
    /// A whole response.
    case response(id: Int, HTTPResponseMessage)
    /// A streamed response: its head, then its body as it arrives, then its end.
    case streamHead(id: Int, status: Int, headers: [HTTPHeader])
    case streamBody(id: Int, [UInt8])
    case streamEnd(id: Int)
    case transportFailed(id: Int)
    case timerFired
    /// The user unpairs: the keychain items go.
    case forget
}

public enum BridgeClientEffect: Sendable, Equatable {
    /// Make this request to `baseURL`; stream its answer back when it is a stream.
    case request(id: Int, HTTPRequestMessage)
    case cancelRequest(id: Int)
    case started(id: Int, command: String)
    /// Store (or, nil, delete) the keychain items.
    case keychainChanged(BridgeClient.Keychain?)
    case paired(daemonID: String)
    case chunk(id: Int, text: String)
    /// The answer is complete: the stream's `done` data, or the whole response.
    case finished(id: Int, JSONValue)
    case failed(id: Int, BridgeError)
}

/// A failure the app shows as a banner, with a message a person can act on. None of them
/// stops the next request.
public enum BridgeError: Sendable, Equatable {
    case notPaired
    case unknownCommand(command: String, supported: [String])
    case invalidRequest(String)
    /// The token is no longer valid: pair again.
    case unauthorized
    case pairingRefused
    case tooManyAttempts(retryAfterSeconds: Int)
    /// The desktop is asleep or its daemon is not running.
    case bridgeOffline
    case timedOut
    /// The answer stopped halfway.
    case interrupted(String)
    case server(status: Int, code: String)

    public var banner: String {
        switch self {
        case .notPaired: return "Pair this phone with your computer first."
        case .unknownCommand(let command, let supported):
            return "Your computer's bridge does not know “\(command)”. It supports: \(supported.joined(separator: ", "))."
        case .invalidRequest(let message): return "The request was not valid: \(message)"
        case .unauthorized: return "Your computer no longer accepts this phone. Pair again."
        case .pairingRefused: return "That PIN did not work. Check it, or ask your computer for a new one."
        case .tooManyAttempts(let seconds): return "Too many wrong PINs. Try again in \(seconds) s."
        case .bridgeOffline: return "Your computer is offline or asleep."
        case .timedOut: return "Your computer did not answer in time. Try again."
        case .interrupted: return "The answer was cut off. Try again."
        case .server(let status, _): return "Something went wrong (\(status)). Try again."
        }
    }

    /// The banner for a refusal the bridge answered with.
    public init(_ failure: BridgeFailure) {
        switch failure {
        case .unknownCommand(let command, let supported): self = .unknownCommand(command: command, supported: supported)
        case .invalidEnvelope(let message), .sealFailed(let message): self = .invalidRequest(message)
        case .invalidPayload(let field, let message): self = .invalidRequest("\(field): \(message)")
        case .unsupportedVersion(let version): self = .invalidRequest("protocol version \(version) is not supported")
        case .payloadTooLarge: self = .invalidRequest("the request is too large")
        case .unauthorized: self = .unauthorized
        case .invalidPIN: self = .pairingRefused
        case .tooManyAttempts(let seconds): self = .tooManyAttempts(retryAfterSeconds: seconds)
        case .bridgeOffline: self = .bridgeOffline
        case .bridgeTimeout: self = .timedOut
        case .notFound, .methodNotAllowed: self = .server(status: failure.status, code: failure.code)
        }
    }
}
