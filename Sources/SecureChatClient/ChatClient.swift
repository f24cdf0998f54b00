import ChatCrypto
public import LabKernel

/// The d3chat client of one device as a sans-I/O core: encryption per the profile,
/// session restore, the seed's startup order, reconnects, de-duplication, ordered
/// timelines and a queue of pending sends with idempotency keys.
///
/// Theory of operation. The driver feeds `ClientInput`s (user intents, HTTP responses by
/// request id, socket events, timer expiries) with `now`; the core answers with
/// `ClientEffect`s (requests to make, socket actions, a timer, messages for the app,
/// errors to show). Each request carries its purpose, so a response continues the flow
/// that asked: startup is me → ticket → socket → channels → messages; a send gathers
/// members, device bundles and sessions, then posts ciphertext. A 401 triggers one
/// refresh and one retry of the request; a second 401, or a failed refresh, logs out
/// cleanly. Everything that must survive a restart is in `snapshot`.
public struct ChatClient: Sendable {
    public var snapshot: Snapshot
    var socket = SocketState.closed
    var reconnectAttempts = 0
    var inFlight: [Int: InFlight] = [:]
    var nextRequest = 1
    var refreshing = false
    /// Requests parked until the refresh finishes.
    var parked: [InFlight] = []
    var sendStage = SendStage.idle
    var channelsLoaded = false
    /// Group messages waiting for their sender's distribution, per `channel|device`.
    var heldGroup: [String: [JSONValue]] = [:]
    /// Bundles fetched for the current send, by device, and the users fetched.
    var bundles: [String: PreKeyBundle] = [:]
    var bundlesFetched: Set<String> = []
    /// The devices the distribution in flight goes to.
    var pendingDistribution: Set<String> = []
    /// Ids handled without a timeline entry (key distributions), so they are not redone.
    var seenOnly: Set<String> = []
    public internal(set) var stats = Stats()

    public struct Stats: Sendable, Equatable {
        public var decrypted = 0
        public var decryptionFailures = 0
        public var notAddressed = 0
        public var refreshes = 0
        public var reconnects = 0
        public var replenished = 0

        public init() {}
    }

    /// What a device keeps across restarts.
    public struct Snapshot: Sendable, Codable {
        public var baseURL = ""
        public var username: String?
        public var userID: String?
        public var deviceID: String?
        public var accessToken: String?
        public var refreshToken: String?
        public var keys: ChatKeyStore?
        public var generator: SeededGenerator
        public var channels: [String: ChannelInfo] = [:]
        /// Delivered messages by id, and each channel's order.
        public var messages: [String: ChatClientMessage] = [:]
        public var timelines: [String: [String]] = [:]
        /// Our own plaintexts by message id: our chains cannot decrypt what they sent.
        public var ownPlaintexts: [String: String] = [:]
        public var pending: [PendingSend] = []
        /// Device ids of users, from their bundles.
        public var devicesOfUser: [String: [String]] = [:]

        public init(seed: StreamSeed) { generator = seed.generator() }
    }

    public struct ChannelInfo: Sendable, Equatable, Codable {
        public var id: String
        public var isDM: Bool
        public var name: String?
        public var members: [String] = []
        public var membersFetched = false
        /// When the member list was last fetched (a group send refreshes it after a minute).
        public var membersFetchedAt: Instant?
    }

    public struct PendingSend: Sendable, Equatable, Codable {
        public var clientID: String
        public var channelID: String
        public var text: String
        public var blocked: String?
    }

    enum SocketState: Equatable { case closed, ticketing, opening, open, loggedOut }

    enum SendStage: Equatable { case idle, working, waitingRetry }

    struct InFlight: Sendable {
        var purpose: Purpose
        var request: HTTPRequestMessage
        var retried: Bool
    }

    enum Purpose: Sendable, Equatable {
        case register, login, refresh, me, uploadKeys, replenish, ticket, channels
        case messages(channel: String)
        case members(channel: String)
        case bundles(user: String)
        case post(clientID: String, distribution: Bool)
        case announceSenderKey(channel: String)
        case openDM, createGroup, addMember
    }

    public init(snapshot: Snapshot) { self.snapshot = snapshot }

    public var isSignedIn: Bool { snapshot.accessToken != nil }
    public var isConnected: Bool { socket == .open }
    public var userID: String? { snapshot.userID }
    public var deviceID: String? { snapshot.deviceID }

    /// A channel's delivered messages, in order.
    public func timeline(_ channel: String) -> [ChatClientMessage] {
        (snapshot.timelines[channel] ?? []).compactMap { snapshot.messages[$0] }
    }
}

/// A message as the app shows it.
public struct ChatClientMessage: Sendable, Equatable, Codable {
    public var id: String
    public var channelID: String
    public var senderID: String
    public var senderDeviceID: String?
    public var text: String
    public var createdAt: String
    public var edited: Bool
    public var deleted: Bool
}

public enum ClientInput: Sendable {
    case register(username: String, password: String, deviceName: String)
    case login(username: String, password: String, deviceName: String)
    /// After a restart: restore from the snapshot and connect.
    case start
    case response(id: Int, HTTPResponseMessage)
    /// The request never got an answer (connection refused, reset, timed out).
    case transportFailed(id: Int)
    case socketOpened
    case socketText(String)
    case socketClosed(code: UInt16)
    case timerFired
    case send(channelID: String, text: String)
    case openDM(userID: String)
    case createGroup(name: String)
    case addMember(channelID: String, userID: String)
    /// The user started or stopped typing in a channel (a socket frame; nothing when offline).
    case typing(channelID: String, started: Bool)
}

public enum ClientEffect: Sendable, Equatable {
    case request(id: Int, HTTPRequestMessage)
    case openSocket(ticket: String)
    case socketSend(String)
    case closeSocket
    case startTimer(after: TimeSpan)
    case delivered(ChatClientMessage)
    case channelAdded(String)
    case surfaced(ClientError)
    case loggedOut(reason: String)
}

public enum ClientError: Sendable, Equatable {
    /// Encryption failed: the message stays queued, nothing is sent.
    case encryptionFailed(clientID: String, reason: String)
    case decryptionFailed(messageID: String, reason: String)
    case sendRefused(clientID: String, status: Int, detail: String)
    case requestFailed(status: Int, detail: String)
}
