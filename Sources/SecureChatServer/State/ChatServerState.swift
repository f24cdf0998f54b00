public import LabKernel

/// Everything the chat server keeps. Plain dictionaries with the indexes the routes need;
/// the live driver persists it, the simulator keeps it in memory.
public struct ChatServerState: Sendable {
    public var users: [String: ChatUser] = [:]
    public var userIDByName: [String: String] = [:]
    public var devices: [String: ChatDevice] = [:]
    public var refreshTokens: [String: RefreshRecord] = [:]
    public var accessTokens: [String: AccessRecord] = [:]
    public var tickets: [String: TicketRecord] = [:]
    public var bundles: [String: KeyBundleRecord] = [:]
    public var channels: [String: ChatChannel] = [:]
    /// Channel id → user id → membership.
    public var members: [String: [String: Membership]] = [:]
    /// User id → the channels they belong to.
    public var channelsOfUser: [String: Set<String>] = [:]
    /// The DM channel of a pair of users, keyed `smaller id|larger id`.
    public var dmByPair: [String: String] = [:]
    public var messages: [String: ChatMessage] = [:]
    /// `user id|client_message_id` → message id: retried sends return the first message.
    public var messageByClientID: [String: String] = [:]
    public var x3dhSetups: [String: JSONValue] = [:]
    /// Channel id → device id → announcement.
    public var senderKeys: [String: [String: SenderKeyRecord]] = [:]
    public var settings: [String: JSONValue] = ["registration_open": true, "max_message_bytes": 65_536]
    public var audit: [AuditEntry] = []
    public var connections: [Int: Connection] = [:]
    public var nextConnection = 1
    public var presence: [String: String] = [:]
    public var rateBuckets: [String: RateBucket] = [:]

    public init() {}

    /// A WebSocket connection: whose, and the channels it hears.
    public struct Connection: Sendable, Equatable {
        public var userID: String
        public var deviceID: String
        public var channels: Set<String>
    }

    /// A token bucket: `tokens` left at `updated`.
    public struct RateBucket: Sendable, Equatable {
        public var tokens: Double
        public var updated: Instant
    }

    static func pairKey(_ a: String, _ b: String) -> String { a < b ? "\(a)|\(b)" : "\(b)|\(a)" }

    func isMember(_ userID: String, of channelID: String) -> Bool { members[channelID]?[userID] != nil }

    mutating func addMember(_ userID: String, to channelID: String, role: Membership.Role, at now: Instant) {
        members[channelID, default: [:]][userID] = Membership(userID: userID, role: role, joinedAt: now)
        channelsOfUser[userID, default: []].insert(channelID)
    }

    mutating func removeMember(_ userID: String, from channelID: String) {
        members[channelID]?[userID] = nil
        channelsOfUser[userID]?.remove(channelID)
    }
}
