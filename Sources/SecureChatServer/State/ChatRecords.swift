public import LabKernel

/// The rows of the d3chat reference server (wire-notes §d), as values.
public struct ChatUser: Sendable, Equatable, Codable {
    public enum Role: String, Sendable, Codable { case member, admin }
    public enum Standing: Sendable, Equatable, Codable {
        case active
        case suspended(until: Instant)
        case banned
    }

    public var id: String
    public var username: String
    public var email: String?
    public var displayName: String?
    public var passwordHash: String
    public var role: Role
    public var standing: Standing
    public var createdAt: Instant
    /// Bumped whenever the set of the user's devices that can be encrypted to changes (a
    /// device uploads keys, or is removed): clients compare it to know their list is stale.
    public var deviceSetVersion = 0

    public init(id: String, username: String, email: String?, displayName: String?, passwordHash: String, role: Role, standing: Standing,
                createdAt: Instant, deviceSetVersion: Int = 0) {
        self.id = id
        self.username = username
        self.email = email
        self.displayName = displayName
        self.passwordHash = passwordHash
        self.role = role
        self.standing = standing
        self.createdAt = createdAt
        self.deviceSetVersion = deviceSetVersion
    }

    enum CodingKeys: String, CodingKey { case id, username, email, displayName, passwordHash, role, standing, createdAt, deviceSetVersion }

    /// Rows written before the device-set version existed read as version 0.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(id: try c.decode(String.self, forKey: .id), username: try c.decode(String.self, forKey: .username),
                  email: try c.decodeIfPresent(String.self, forKey: .email), displayName: try c.decodeIfPresent(String.self, forKey: .displayName),
                  passwordHash: try c.decode(String.self, forKey: .passwordHash), role: try c.decode(Role.self, forKey: .role),
                  standing: try c.decode(Standing.self, forKey: .standing), createdAt: try c.decode(Instant.self, forKey: .createdAt),
                  deviceSetVersion: try c.decodeIfPresent(Int.self, forKey: .deviceSetVersion) ?? 0)
    }
}

public struct ChatDevice: Sendable, Equatable, Codable {
    public var id: String
    public var userID: String
    public var name: String
    public var deviceKeyPublic: String?
    public var lastSeenAt: Instant
    public var createdAt: Instant
}

/// A refresh token, stored by its SHA-256. Tokens of one login form a family; using a
/// rotated token again revokes the whole family (reuse detection).
public struct RefreshRecord: Sendable, Equatable, Codable {
    public enum State: Sendable, Equatable, Codable { case active, rotated, revoked }
    public var tokenHash: String
    public var familyID: String
    public var userID: String
    public var deviceID: String
    public var expiresAt: Instant
    public var state: State
    /// When it was rotated, and the hash of the token that replaced it: a retry whose
    /// answer was lost may present it again within `refreshRetryGrace`.
    public var rotatedAt: Instant?
    public var successor: String?
    /// The access token issued with it has been used: the client got this pair.
    public var confirmed: Bool?

    public init(tokenHash: String, familyID: String, userID: String, deviceID: String, expiresAt: Instant, state: State, rotatedAt: Instant?,
                successor: String?, confirmed: Bool?) {
        self.tokenHash = tokenHash
        self.familyID = familyID
        self.userID = userID
        self.deviceID = deviceID
        self.expiresAt = expiresAt
        self.state = state
        self.rotatedAt = rotatedAt
        self.successor = successor
        self.confirmed = confirmed
    }
}

public struct AccessRecord: Sendable, Equatable, Codable {
    public var userID: String
    public var deviceID: String
    public var familyID: String
    public var expiresAt: Instant
    /// The hash of the refresh token issued with it (its first use confirms that pair).
    public var refreshHash: String?
}

public struct TicketRecord: Sendable, Equatable, Codable {
    public var userID: String
    public var deviceID: String
    /// The login the ticket was asked for with: revoking that family closes its sockets.
    public var familyID: String
    public var expiresAt: Instant
}

/// A device's published keys. One-time pre-keys are handed out oldest first, each once.
public struct KeyBundleRecord: Sendable, Equatable, Codable {
    public var deviceID: String
    public var userID: String
    public var identityKey: String
    public var signedPreKey: String
    public var signedPreKeySignature: String
    /// As 32-byte values, not their base64 texts: a server holds tens of them for every
    /// device, and a text of 44 characters is a heap object of 80 bytes. (Stored in base64,
    /// as they came.)
    public var oneTimeKeys: [Bytes32]
}

public struct ChatChannel: Sendable, Equatable, Codable {
    public enum Encryption: String, Sendable, Codable { case x3dh, senderKeys = "sender_keys" }
    /// Who may join a group: anyone (`public`), or only people a member invited or added
    /// (`private`, the default). DMs have their two members and no joining.
    public enum Visibility: String, Sendable, Codable { case `private`, `public` }
    public var id: String
    public var name: String?
    public var isDM: Bool
    public var encryption: Encryption
    public var visibility: Visibility = .private
    /// A channel of the legacy protocol: plaintext (`protocol_version` 1) is accepted here
    /// and the API says so. Only where the server allows it and the creator asked.
    public var legacyPlaintext = false
    public var createdBy: String
    public var createdAt: Instant
    /// Messages in order; `created` strictly increases within a channel. Not stored with
    /// the row: a load rebuilds it from the messages. With an archive, the newest ones
    /// only, kept in memory (`MessageTable`); the older ones were set aside.
    public var messageIDs: [String] = []
    /// How many older messages of the channel were set aside into the archive.
    public var setAsideCount = 0

    enum CodingKeys: String, CodingKey { case id, name, isDM, encryption, visibility, legacyPlaintext, createdBy, createdAt }

    public init(id: String, name: String?, isDM: Bool, encryption: Encryption, visibility: Visibility = .private, legacyPlaintext: Bool = false,
                createdBy: String, createdAt: Instant) {
        self.id = id
        self.name = name
        self.isDM = isDM
        self.encryption = encryption
        self.visibility = visibility
        self.legacyPlaintext = legacyPlaintext
        self.createdBy = createdBy
        self.createdAt = createdAt
    }

    /// Rows written before visibility and the legacy flag existed read as private and
    /// ciphertext-only.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        id = try c.decode(String.self, forKey: .id)
        name = try c.decodeIfPresent(String.self, forKey: .name)
        isDM = try c.decode(Bool.self, forKey: .isDM)
        encryption = try c.decode(Encryption.self, forKey: .encryption)
        visibility = try c.decodeIfPresent(Visibility.self, forKey: .visibility) ?? .private
        legacyPlaintext = try c.decodeIfPresent(Bool.self, forKey: .legacyPlaintext) ?? false
        createdBy = try c.decode(String.self, forKey: .createdBy)
        createdAt = try c.decode(Instant.self, forKey: .createdAt)
    }
}

/// An invitation into a private group: the invited user may join until it expires.
public struct ChannelInvite: Sendable, Equatable, Codable {
    public var userID: String
    public var invitedBy: String
    public var expiresAt: Instant
}

public struct Membership: Sendable, Equatable, Codable {
    public enum Role: String, Sendable, Codable { case owner, admin, member }
    public var userID: String
    public var role: Role
    public var joinedAt: Instant
}

public struct ChatMessage: Sendable, Equatable, Codable {
    public var id: String
    public var channelID: String
    public var senderID: String
    public var senderDeviceID: String?
    public var content: String
    public var contentType: String
    public var protocolVersion: Int
    public var replyToID: String?
    public var clientMessageID: String?
    public var editedAt: Instant?
    public var createdAt: Instant
    public var deleted: Bool = false

    public init(id: String, channelID: String, senderID: String, senderDeviceID: String?, content: String, contentType: String, protocolVersion: Int,
                replyToID: String?, clientMessageID: String?, editedAt: Instant?, createdAt: Instant, deleted: Bool = false) {
        self.id = id
        self.channelID = channelID
        self.senderID = senderID
        self.senderDeviceID = senderDeviceID
        self.content = content
        self.contentType = contentType
        self.protocolVersion = protocolVersion
        self.replyToID = replyToID
        self.clientMessageID = clientMessageID
        self.editedAt = editedAt
        self.createdAt = createdAt
        self.deleted = deleted
    }
}

/// A sender key announcement (public parts only: the profile sends chain keys inside
/// pairwise sessions, never through the server).
public struct SenderKeyRecord: Sendable, Equatable, Codable {
    public var channelID: String
    public var deviceID: String
    public var senderKeyPublic: String
    public var messageNumber: Int
}

public struct AuditEntry: Sendable, Equatable, Codable {
    public var at: Instant
    public var actorID: String
    public var action: String
    public var target: String
    public var detail: String
}
