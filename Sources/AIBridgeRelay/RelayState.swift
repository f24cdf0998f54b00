public import LabKernel

/// Everything the relay keeps. Daemons and tokens are durable (`RelayStoreChange`);
/// tokens only as their SHA-256, so a copy of the database holds no usable bearer. Pairing
/// sessions (with their PINs), tunnels, exchanges and attempt counters live in memory.
public struct RelayState: Sendable {
    /// Daemon id → the keys it first came with (identity) and now has (pairing).
    public var daemons: [String: DaemonRecord] = [:]
    /// SHA-256 (hex) of a token → whose it is.
    public var tokens: [String: TokenRecord] = [:]
    /// `daemon|device` → the hash of that device's token (re-pairing replaces it).
    var tokenOfDevice: [String: String] = [:]
    var sessions: [String: PairingSession] = [:]
    var tunnels: [Int: Tunnel] = [:]
    /// Daemon id → its authenticated tunnel.
    var tunnelOfDaemon: [String: Int] = [:]
    var exchanges: [Int: Exchange] = [:]
    /// Wrong PINs per client address, in the current window.
    var attempts: [String: Attempts] = [:]
    var nextTunnel = 1
    var nextExchange = 1

    public init() {}

    /// Closes every pairing session a daemon has open (they announce nothing: the daemon
    /// is opening another or has gone).
    mutating func closeSessions(of daemon: String) {
        for id in sessions.filter({ $0.value.daemonID == daemon }).keys.sorted() { sessions[id] = nil }
    }

    /// Adds a loaded token with its index.
    package mutating func load(token hash: String, _ record: TokenRecord) {
        tokens[hash] = record
        tokenOfDevice[record.daemonID + "|" + record.deviceID] = hash
    }

    public var connectedDaemons: [String] { tunnelOfDaemon.keys.sorted() }
    public var openSessions: Int { sessions.count }

    /// Whether a pairing session open now takes `pin`.
    public func offers(pin: String) -> Bool { sessions.values.contains { $0.pin == pin } }
}

public struct DaemonRecord: Sendable, Equatable, Codable {
    public var id: String
    /// Ed25519: what the daemon signs its tunnel hello with (trust on first use).
    public var identityKey: [UInt8]
    /// X25519: the key pairing handed out; a daemon that comes back with another one has
    /// restarted, and the tokens issued under the old one stop working.
    public var serverPublicKey: [UInt8]
    public var firstSeen: Instant
}

public struct TokenRecord: Sendable, Equatable, Codable {
    public var daemonID: String
    public var deviceID: String
    /// The daemon key it was issued under.
    public var serverPublicKey: [UInt8]
    public var issuedAt: Instant
}

struct PairingSession: Sendable {
    var daemonID: String
    var pin: String
    var expiresAt: Instant
    /// Wrong PINs tried while it was open.
    var failures: Int
}

struct Tunnel: Sendable {
    var challenge: [UInt8]
    /// Set once its hello verified.
    var daemonID: String?
}

struct Exchange: Sendable {
    enum Kind: Sendable {
        case pair(deviceID: String)
        case chat
    }

    var kind: Kind
    var daemonID: String
    var tunnel: Int
    var deadline: Instant
    var streaming: Bool
}

struct Attempts: Sendable {
    var since: Instant
    var failures: Int
}

/// A durable change, committed before the answer goes out.
public enum RelayStoreChange: Sendable, Equatable {
    case daemon(DaemonRecord)
    /// A token's hash and record; nil: revoked.
    case token(hash: String, TokenRecord?)
}
