import ChatCrypto
public import LabKernel

/// The d3chat client of one device as a sans-I/O core: encryption per the profile,
/// session restore, the seed's startup order, reconnects, de-duplication, ordered
/// timelines and a queue of pending sends and edits with idempotency keys.
///
/// Theory of operation. The driver feeds `ClientInput`s (user intents, HTTP responses by
/// request id, socket events, timer expiries) with `now`; the core answers with
/// `ClientEffect`s (requests to make, socket actions, messages and events for the app,
/// errors to show) and keeps its timers as data: after every input the driver arms one
/// wake-up at `nextDeadline` and feeds `.timerFired` then (a spurious one does nothing).
///
/// Each request carries its purpose, so a response continues the flow that asked:
/// startup is me → ticket → socket → channels → messages (a push's background window only
/// the messages of the channels it knows, `.catchUp`); a send gathers members, their
/// device sets, bundles for devices without a session, a sender-key distribution, then
/// posts ciphertext. Every request has a deadline (`Config.requestTimeout`); one that
/// passes it counts as failed in transit, so nothing waits forever. A 401 parks the
/// request and starts one refresh; only a 401 to the refresh logs out. A refresh that
/// fails otherwise (in transit, 429, 5xx) backs off and tries again, and parked requests
/// give up after `Config.parkLimit`. Device sets are versioned by the server: a
/// `devices.changed` or membership event makes the next send re-fetch, encrypt to new
/// devices, drop removed ones, and start a new sender key when a device or member left.
/// Everything that must survive a restart is in `snapshot`.
public struct ChatClient: Sendable {
    public var snapshot: Snapshot
    public var config: Config
    var socket = SocketState.closed
    var reconnectAttempts = 0
    var inFlight: [Int: InFlight] = [:]
    var nextRequest = 1
    var refresh = RefreshState.idle
    /// Requests parked until the refresh finishes, with when they gave up waiting.
    var parked: [(flight: InFlight, until: Instant)] = []
    var timers = TimerTable<ChatTimer>()
    var sendStage = SendStage.idle
    var channelsLoaded = false
    /// Pages whose fetch failed, to ask again (with the channel list) at `.resync`.
    var resyncPages: [String] = []
    var resyncChannels = false
    /// Bundles fetched for the current send, by device.
    var bundles: [ChatID: PreKeyBundle] = [:]
    /// Users whose device set must be fetched again before the next send to them.
    var staleDeviceSets: Set<String> = []
    /// The devices the distribution in flight goes to.
    var pendingDistribution: Set<ChatID> = []
    /// Ids handled without a timeline entry (key distributions), so they are not redone.
    var seenOnly: Set<ChatID> = []
    /// Each channel's newest held message when this run's catch-up began (the socket opened,
    /// or a push's `.catchUp`), nil for a channel that held none: only a held message this
    /// old shows a page reached what the device had, since messages the socket delivers
    /// meanwhile (or its own sends) are newer than the gap.
    var catchUpAnchors: [String: ChatTime?] = [:]
    /// Who is typing where, until when (indicators lapse without a refresh).
    var typingUntil: [TypingKey: Instant] = [:]
    public internal(set) var stats = Stats()

    public struct Config: Sendable, Equatable {
        /// How long a request may go unanswered before it counts as failed in transit.
        public var requestTimeout: TimeSpan = .seconds(30)
        /// How long a request parked behind a refresh waits before giving up.
        public var parkLimit: TimeSpan = .minutes(2)
        /// Refresh retries: 1 s doubling to this, times 0.5…1.5.
        public var refreshBackoffMax: TimeSpan = .seconds(60)
        /// A typing indicator lapses this long after its last `typing.start`.
        public var typingLapse: TimeSpan = .seconds(6)
        /// Messages per page of `loadOlder`.
        public var historyPage = 50

        public init() {}
    }

    public struct Stats: Sendable, Equatable {
        public var decrypted = 0
        public var decryptionFailures = 0
        public var notAddressed = 0
        public var refreshes = 0
        public var refreshRetries = 0
        public var reconnects = 0
        public var replenished = 0
        public var timeouts = 0
        public var senderKeyRotations = 0
        public var deviceSetFetches = 0
        /// Crypto work, for what it costs a battery: X3DH handshakes (either side; a
        /// receiver counts messages that carry X3DH data), Ed25519 signatures and checks.
        public var handshakes = 0
        public var signatures = 0
        public var verifications = 0

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
        /// From when the access token is not used any more and a refresh goes first (by
        /// this device's clock, from the `expires_in` of the answer that brought it): a
        /// minute before it expires, or half its life if that is shorter. Nil when the
        /// server gave no lifetime (or an older snapshot): then a 401 tells.
        public var accessTokenStaleAt: Instant?
        public var keys: ChatKeyStore?
        public var generator: SeededGenerator
        public var channels: [String: ChannelInfo] = [:]
        /// Each channel's delivered messages in order (`ChatClient+Timelines`).
        public var timelines: [String: [ChatClientMessage]] = [:]
        /// The timelines of channels this device left, by channel: still delivered.
        public var formerTimelines: [String: [ChatClientMessage]]?
        /// Our own plaintexts by message id until the message is delivered (our chains cannot
        /// decrypt what they sent); then the message holds the text.
        public var ownPlaintexts: [String: String] = [:]
        public var pending: [PendingSend] = []
        /// Each user's devices that can be encrypted to, as the server last listed them.
        public var deviceSets: [String: DeviceSet] = [:]
        /// Ids handled without a timeline entry (key distributions), newest last, at most
        /// `ChatClient.seenLimit`: a catch-up after a restart must not open them again
        /// (their ratchet keys are spent). Optional so older snapshots still read.
        /// As 16-byte ids, written as their texts: a device sees a distribution for every
        /// sender key that reaches it, and keeps up to 2,000.
        public var seenWithoutTimeline: [ChatID]?
        /// Group messages waiting for their sender's distribution, per `channel|device`, as
        /// JSON text: stored, because a catch-up that reaches newer messages will not fetch
        /// them again.
        public var heldGroup: [SenderKeyOwner: [String]]?
        /// The `edited_at` of the version held of each edited message. A `message.edit`
        /// event for that version or an older one is not opened: a catch-up page can bring
        /// an edited message before the socket's event for the edit, whose key the page's
        /// copy has already spent, and an older edit must not replace a newer text.
        /// Optional so older snapshots still read.
        public var editedAt: [ChatID: String]?
        /// Where older messages are set aside (nil: all stay in memory), and how many are
        /// there (`ChatClient+Timelines`). Not encoded: see `TimelineArchive`.
        public internal(set) var archive: TimelineArchiveSlot?
        public internal(set) var messagesSetAside = 0

        public init(seed: StreamSeed) { generator = seed.generator() }

        enum CodingKeys: String, CodingKey {
            case baseURL, username, userID, deviceID, accessToken, refreshToken, accessTokenStaleAt, keys, generator, channels, timelines,
                 formerTimelines, ownPlaintexts, pending, deviceSets, seenWithoutTimeline, heldGroup, editedAt
        }
    }

    /// A user's addressable devices and the version of that list. The ids are 16-byte
    /// values (written as their texts): a phone keeps every peer's list for its life.
    public struct DeviceSet: Sendable, Equatable, Codable {
        public var version: Int
        public var devices: [ChatID]
    }

    /// Where an unfinished catch-up has to page back to: the `created_at` of the newest
    /// message the channel held when it began, nil when it held none.
    public struct UnfinishedCatchUp: Sendable, Equatable, Codable {
        public var newestHeld: String?
    }

    public struct ChannelInfo: Sendable, Equatable, Codable {
        public var id: String
        public var isDM: Bool
        public var name: String?
        /// Where catching up still has to page back from (`before=` cursors): stored, so a
        /// catch-up the app's suspension cut short goes on at the next start instead of
        /// leaving a hole below the newest page.
        public var catchUpFrom: [String]?
        /// A page of it has been fetched: from then on, catching up goes back all the way
        /// to what this device has (before that, a channel shows its newest page).
        public var synced: Bool?
        /// The members' user ids (16-byte values, written as their texts).
        public var members: [ChatID] = []
        public var membersFetched = false
        /// When the member list was last fetched (a group send refreshes it after a minute,
        /// and at once after a membership event).
        public var membersFetchedAt: Instant?
        /// `loadOlder` reached the channel's first message.
        public var reachedStart = false
        /// A catch-up that began and has not yet paged back to what the device held then.
        /// Stored, so one the server failed, or the app's suspension cut off before a page
        /// came, still pages back past the messages the socket delivered since.
        public var unfinishedCatchUp: UnfinishedCatchUp?
    }

    /// A message or an edit waiting to go out (in order; one at a time).
    public struct PendingSend: Sendable, Equatable, Codable {
        public var clientID: String
        public var channelID: String
        public var text: String
        /// Why it is stuck (encryption failed); nil while it can go.
        public var blocked: String?
        /// Set for an edit: the message whose content this replaces.
        public var edits: String?

        public init(clientID: String, channelID: String, text: String, blocked: String? = nil, edits: String? = nil) {
            self.clientID = clientID
            self.channelID = channelID
            self.text = text
            self.blocked = blocked
            self.edits = edits
        }
    }

    enum SocketState: Equatable { case closed, ticketing, opening, open, loggedOut }

    enum SendStage: Equatable { case idle, working, waitingRetry }

    /// The refresh: not needed, on the wire, or waiting to try again after a failure.
    /// `attempt` counts the refreshes since the last success (it sets the backoff).
    enum RefreshState: Equatable {
        case idle
        case inFlight(attempt: Int)
        case backingOff(attempt: Int)
    }

    /// The core's timers (at most one deadline each, `TimerTable`).
    enum ChatTimer: Hashable, Sendable {
        /// Reconnect the socket (backoff after a drop).
        case reconnect
        /// Try the head of the send queue again (after 429, 5xx or a lost answer).
        case sendRetry
        /// Try the refresh again (after a failure that was not a 401).
        case refreshRetry
        /// The earliest deadline among requests in flight.
        case requests
        /// The earliest give-up time among parked requests.
        case parked
        /// Re-fetch the channel list and pages that failed.
        case resync
        /// The earliest typing indicator to lapse.
        case typing
    }

    struct InFlight: Sendable {
        var purpose: Purpose
        var request: HTTPRequestMessage
        var retried: Bool
        var deadline: Instant
    }

    enum Purpose: Sendable, Equatable {
        case register, login, refresh, me, uploadKeys, replenish, ticket, channels
        case messages(channel: String)
        case olderMessages(channel: String)
        case members(channel: String)
        case deviceSet(user: String)
        case bundle(device: String)
        case post(clientID: String, distribution: Bool)
        case edit(clientID: String)
        case delete(message: String)
        case leave(channel: String)
        case join(channel: String)
        case removeDevice(device: String)
        case logout, logoutAll
        case openDM, createGroup, addMember
    }

    struct TypingKey: Hashable, Sendable {
        var channel: String
        var user: String
    }

    public init(snapshot: Snapshot, config: Config = Config()) {
        self.snapshot = snapshot
        self.config = config
        seenOnly = Set(snapshot.seenWithoutTimeline ?? [])
    }

    /// How many ids handled without a timeline entry a snapshot keeps.
    static let seenLimit = 2_000

    public var isSignedIn: Bool { snapshot.accessToken != nil }
    public var isConnected: Bool { socket == .open }
    /// Connected with no request unanswered: a start's catch-up has reached what the
    /// device held, and what it fetched to decrypt has come.
    public var isSettled: Bool { isConnected && inFlight.isEmpty }
    public var userID: String? { snapshot.userID }
    public var deviceID: String? { snapshot.deviceID }

    /// When the core next needs `.timerFired` (nil: nothing armed).
    public var nextDeadline: Instant? { timers.nextDeadline }

    /// A channel's delivered messages, in order.
    public func timeline(_ channel: String) -> [ChatClientMessage] { snapshot.timeline(channel) }
}

public enum ClientInput: Sendable {
    case register(username: String, password: String, deviceName: String)
    case login(username: String, password: String, deviceName: String)
    /// After a restart: restore from the snapshot and connect.
    case start
    /// A push woke the app in the background for a few seconds: fetch what each channel
    /// this device knows got, as a platform's background fetch does, without the socket,
    /// the channel list or sends (those wait for `.start`, when the app is on screen).
    case catchUp
    case response(id: Int, HTTPResponseMessage)
    /// The request never got an answer (connection refused, reset, timed out).
    case transportFailed(id: Int)
    case socketOpened
    case socketText(String)
    case socketClosed(code: UInt16)
    /// `nextDeadline` arrived.
    case timerFired
    case send(channelID: String, text: String)
    /// Replaces the content of one of our messages (re-encrypted for the channel as it is now).
    case edit(messageID: String, text: String)
    case delete(messageID: String)
    case openDM(userID: String)
    case createGroup(name: String)
    case addMember(channelID: String, userID: String)
    /// Leaves a group: its channel goes from this device's list.
    case leave(channelID: String)
    /// Joins a group (public, or one this user was invited to).
    case join(channelID: String)
    /// Fetches the page of messages before the oldest this device has.
    case loadOlder(channelID: String)
    /// The user started or stopped typing in a channel (a socket frame; nothing when offline).
    case typing(channelID: String, started: Bool)
    /// `online`, `away` or `offline`, for the people this user shares channels with.
    case setPresence(String)
    /// Ends this device's session (its login), or every session of the user.
    case logout
    case logoutAll
    /// Removes another of this user's devices (a lost phone): the server closes its
    /// sockets, revokes its tokens, and senders stop encrypting to it.
    case removeDevice(deviceID: String)
}

public enum ClientEffect: Sendable, Equatable {
    case request(id: Int, HTTPRequestMessage)
    case openSocket(ticket: String)
    case socketSend(String)
    case closeSocket
    /// A message arrived, or changed (edited, deleted): the app shows it as it is now.
    case delivered(ChatClientMessage)
    case channelAdded(String)
    /// The channel left this device's list (left, removed by a moderator, deleted).
    case channelRemoved(String)
    /// A member invited this user into a group (`join` accepts).
    case invited(channelID: String, by: String)
    /// `userID` is (or no longer is) typing in the channel.
    case typing(channelID: String, userID: String, active: Bool)
    case presence(userID: String, status: String)
    /// A `loadOlder` page arrived: how many messages were new, and whether more are older.
    case historyLoaded(channelID: String, added: Int, hasMore: Bool)
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
