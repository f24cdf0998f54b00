public import LabKernel

/// Everything the chat server keeps. Plain dictionaries with the indexes the routes need;
/// the live driver persists it, the simulator keeps it in memory.
public struct ChatServerState: Sendable {
    public var users = Table<ChatUser>()
    public var userIDByName: [String: String] = [:]
    public var devices = Table<ChatDevice>()
    public var refreshTokens = RefreshTokenTable()
    /// By the SHA-256 (hex) of the token, like refresh tokens: a copy of the database
    /// holds no usable bearer token.
    public var accessTokens = Table<AccessRecord>()
    /// Login family → the keys of its access tokens: a refresh retires its family's tokens
    /// without looking at everyone's.
    var accessTokensOfFamily: [String: Set<String>] = [:]
    public var tickets: [String: TicketRecord] = [:]
    /// When the last sweep of expired credentials ran (`ChatServer.forgetExpiredIfDue`);
    /// nil after a start, so the first request sweeps.
    var lastExpirySweep: Instant?
    public var bundles = Table<KeyBundleRecord>()
    /// User id → their devices that have a key bundle (the devices to encrypt to): a send
    /// checks its envelope against it without looking at every bundle on the server.
    public var bundlesOfUser: [String: Set<String>] = [:]
    public var channels = Table<ChatChannel>()
    /// Channel id → user id → membership.
    public var members = Table<[String: Membership]>()
    /// User id → the channels they belong to.
    public var channelsOfUser: [String: Set<String>] = [:]
    /// The DM channel of a pair of users, keyed `smaller id|larger id`.
    public var dmByPair: [String: String] = [:]
    /// Channel id → invited user id → invitation (private groups).
    public var invites = Table<[String: ChannelInvite]>()
    public var messages = MessageTable()
    /// (sender, `client_message_id`) → message id: retried sends return the first message.
    /// Derived from the messages (`rebuildIndexes`), so not stored; its key holds the two
    /// strings the message keeps, not a third joining them. Of the messages in memory: the
    /// archive answers for those set aside (`message(sentBy:clientID:)`).
    public var messageByClientID: [ClientMessageKey: String] = [:]
    public var x3dhSetups = Table<JSONValue>()
    /// Channel id → device id → announcement.
    public var senderKeys = Table<[String: SenderKeyRecord]>()
    public var settings: [String: JSONValue] = ["registration_open": true, "max_message_bytes": 65_536] {
        didSet { settingsChanged = true }
    }
    package var settingsChanged = false
    public var audit: [AuditEntry] = []
    /// Audit entries already in the database.
    package var auditStored = 0
    public var connections: [Int: Connection] = [:]
    /// User id → their open connections, so fan-out looks only at the people concerned.
    public var connectionsOfUser: [String: Set<Int>] = [:]
    public var nextConnection = 1
    public var presence: [String: String] = [:]
    public var rateBuckets: [String: RateBucket] = [:]
    /// Registers and logins waiting for their password work, by job id.
    var pendingAuth: [Int: PendingAuth] = [:]
    var nextPasswordJob = 1

    public init() {}

    /// A WebSocket connection: whose, from which login, and the channels it hears.
    public struct Connection: Sendable, Equatable {
        public var userID: String
        public var deviceID: String
        public var familyID: String
        public var channels: Set<String>
    }

    /// A token bucket: `tokens` left at `updated`.
    public struct RateBucket: Sendable, Equatable {
        public var tokens: Double
        public var updated: Instant
    }

    /// The derived indexes, after a load: names, memberships, DM pairs, channel timelines,
    /// retried sends.
    package mutating func rebuildIndexes() {
        userIDByName = Dictionary(users.values.map { ($0.username.lowercased(), $0.id) }, uniquingKeysWith: { first, _ in first })
        bundlesOfUser = [:]
        for bundle in bundles.values { bundlesOfUser[bundle.userID, default: []].insert(bundle.deviceID) }
        accessTokensOfFamily = [:]
        for (key, token) in accessTokens { accessTokensOfFamily[token.familyID, default: []].insert(key) }
        channelsOfUser = [:]
        for (channel, members) in members {
            for user in members.keys { channelsOfUser[user, default: []].insert(channel) }
        }
        dmByPair = [:]
        for channel in channels.values where channel.isDM {
            let pair = (members[channel.id] ?? [:]).keys.sorted()
            if pair.count == 2 { dmByPair[Self.pairKey(pair[0], pair[1])] = channel.id }
        }
        messageByClientID = [:]
        var timelines: [String: [ChatMessage]] = [:]
        for message in messages.values {
            timelines[message.channelID, default: []].append(message)
            if let key = ClientMessageKey(message) { messageByClientID[key] = message.id }
        }
        for (channel, list) in timelines {
            let ordered = list.sorted { ($0.createdAt, $0.id) < ($1.createdAt, $1.id) }.map(\.id)
            if var record = channels[channel] {
                record.messageIDs = ordered
                channels.load(channel, record)
            }
        }
    }

    static func pairKey(_ a: String, _ b: String) -> String { a < b ? "\(a)|\(b)" : "\(b)|\(a)" }

    public func isMember(_ userID: String, of channelID: String) -> Bool { members[channelID]?[userID] != nil }

    mutating func addMember(_ userID: String, to channelID: String, role: Membership.Role, at now: Instant) {
        members[channelID, default: [:]][userID] = Membership(userID: userID, role: role, joinedAt: now)
        channelsOfUser[userID, default: []].insert(channelID)
    }

    mutating func putAccessToken(_ key: String, _ record: AccessRecord) {
        accessTokens[key] = record
        accessTokensOfFamily[record.familyID, default: []].insert(key)
    }

    mutating func removeAccessToken(_ key: String) {
        guard let record = accessTokens[key] else { return }
        accessTokens[key] = nil
        accessTokensOfFamily[record.familyID]?.remove(key)
        if accessTokensOfFamily[record.familyID]?.isEmpty == true { accessTokensOfFamily[record.familyID] = nil }
    }

    mutating func removeAccessTokens(family: String) {
        for key in accessTokensOfFamily.removeValue(forKey: family) ?? [] { accessTokens[key] = nil }
    }

    /// Stores a device's key bundle (new or replacing its earlier one).
    mutating func putBundle(_ record: KeyBundleRecord) {
        bundles[record.deviceID] = record
        bundlesOfUser[record.userID, default: []].insert(record.deviceID)
    }

    mutating func removeBundle(_ deviceID: String) {
        guard let record = bundles[deviceID] else { return }
        bundles[deviceID] = nil
        bundlesOfUser[record.userID]?.remove(deviceID)
    }

    /// The devices of `userID` that have a key bundle, in id order.
    public func bundleDevices(of userID: String) -> [String] { (bundlesOfUser[userID] ?? []).sorted() }

    mutating func removeMember(_ userID: String, from channelID: String) {
        members[channelID]?[userID] = nil
        channelsOfUser[userID]?.remove(channelID)
    }
}

/// A user's `client_message_id`: a retried send is known by it.
public struct ClientMessageKey: Hashable, Sendable {
    public var userID: String
    public var clientID: String

    public init(userID: String, clientID: String) {
        self.userID = userID
        self.clientID = clientID
    }

    /// The key a stored message is indexed by (nil: it was sent without a client id),
    /// holding the message's own strings.
    init?(_ message: ChatMessage) {
        guard let clientID = message.clientMessageID else { return nil }
        self.init(userID: message.senderID, clientID: clientID)
    }
}

/// A row the chat server wrote (a value) or deleted (nil), by table and key: what a
/// request's reply carries for the driver to commit.
public enum ChatStoreChange: Sendable {
    case user(String, ChatUser?)
    case device(String, ChatDevice?)
    case refreshToken(String, RefreshRecord?)
    case accessToken(String, AccessRecord?)
    case bundle(String, KeyBundleRecord?)
    case channel(String, ChatChannel?)
    case members(String, [String: Membership]?)
    case invites(String, [String: ChannelInvite]?)
    case message(String, ChatMessage?)
    case x3dhSetup(String, JSONValue?)
    case senderKeys(String, [String: SenderKeyRecord]?)
    case settings([String: JSONValue])
    /// An audit entry appended, with its place in the log.
    case audit(Int, AuditEntry)
}

extension ChatServerState {
    /// Every row changed since the last call, table by table in a fixed order, each
    /// table's keys sorted.
    mutating func takeChanges() -> [ChatStoreChange] {
        var changes: [ChatStoreChange] = []
        changes += users.takeDirty().map(ChatStoreChange.user)
        changes += devices.takeDirty().map(ChatStoreChange.device)
        changes += refreshTokens.takeDirty().map(ChatStoreChange.refreshToken)
        changes += accessTokens.takeDirty().map(ChatStoreChange.accessToken)
        changes += bundles.takeDirty().map(ChatStoreChange.bundle)
        changes += channels.takeDirty().map(ChatStoreChange.channel)
        changes += members.takeDirty().map(ChatStoreChange.members)
        changes += invites.takeDirty().map(ChatStoreChange.invites)
        changes += messages.takeDirty().map(ChatStoreChange.message)
        changes += x3dhSetups.takeDirty().map(ChatStoreChange.x3dhSetup)
        changes += senderKeys.takeDirty().map(ChatStoreChange.senderKeys)
        if settingsChanged {
            changes.append(.settings(settings))
            settingsChanged = false
        }
        for index in auditStored..<audit.count { changes.append(.audit(index, audit[index])) }
        auditStored = audit.count
        return changes
    }
}
