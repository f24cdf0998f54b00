public import LabKernel

/// The refresh tokens, by the SHA-256 of each, as rows the driver commits (`RefreshRecord`
/// by the hash's hex text) and as the server keeps them in memory.
///
/// Every refresh leaves the rotated token behind for thirty days (reuse detection reads
/// it), so a phone that refreshes every fifteen minutes while in use keeps dozens, and
/// they were the largest part of a chat server's memory that is not messages. In memory a
/// token is its 32-byte hash held inline (not a 64-character string) and an `Entry` that
/// points at its login's one shared record of who it belongs to; `RefreshRecord` is made
/// when a route reads a token, and for the rows a request changed.
///
/// With an archive (the simulator's), only active tokens stay in memory: a token rotated
/// or revoked goes to the archive, where reuse detection and a lost answer's retry find
/// it. Those are most of a day's tokens, and they are read only when presented again.
public struct RefreshTokenTable: Sendable, Sequence {
    /// Who a login's tokens belong to: one record per login, shared by its tokens.
    final class Login: Sendable {
        let familyID: String
        let userID: String
        let deviceID: String

        init(familyID: String, userID: String, deviceID: String) {
            self.familyID = familyID
            self.userID = userID
            self.deviceID = deviceID
        }
    }

    /// A token as kept: everything of its `RefreshRecord` but the hash (its key) and who
    /// it belongs to (its login).
    struct Entry: Sendable {
        var login: Login
        var expiresAt: Instant
        var rotatedAt: Instant?
        var successor: TokenDigest?
        var state: RefreshRecord.State
        var confirmed: Bool?
    }

    private(set) var entries: [TokenDigest: Entry] = [:]
    private var dirty: Set<TokenDigest> = []
    public private(set) var archive: (any RefreshTokenArchive)?

    public init() {}

    /// Sets rotated and revoked tokens aside into `archive` from now on.
    public mutating func setAside(into archive: any RefreshTokenArchive) { self.archive = archive }

    /// The token stored under `key` (the hex SHA-256), as its row.
    public subscript(key: String) -> RefreshRecord? {
        get { TokenDigest(hex: key).flatMap { digest in entries[digest].map { record(digest, $0) } ?? archive?.record(key) } }
        set {
            guard let digest = TokenDigest(hex: key) else { return }
            if let archive, entries[digest] == nil || newValue.map({ $0.state != .active }) ?? false {
                entries[digest] = nil
                if let newValue { archive.put(newValue) } else { archive.removeToken(key) }
                return
            }
            put(digest, newValue)
            dirty.insert(digest)
        }
    }

    /// In memory, and set aside.
    public var count: Int { entries.count + (archive?.tokenCount ?? 0) }
    public var isEmpty: Bool { count == 0 }
    /// Every token as its row (for inspection: made anew on each call).
    public var rows: [String: RefreshRecord] { Dictionary(uniqueKeysWithValues: map { ($0.key, $0.value) }) }
    public var values: [RefreshRecord] { map(\.value) }

    public func makeIterator() -> some IteratorProtocol<(key: String, value: RefreshRecord)> {
        entries.lazy.map { (key: $0.key.hex, value: record($0.key, $0.value)) }.makeIterator()
    }

    /// Stores a new active token of `login`'s family.
    mutating func issue(_ key: String, login: Login, expiresAt: Instant) {
        guard let digest = TokenDigest(hex: key) else { return }
        entries[digest] = Entry(login: login, expiresAt: expiresAt, state: .active)
        dirty.insert(digest)
    }

    /// The login of the token under `key`: the one its successor shares (one set aside
    /// gets a record of its own).
    func login(of key: String) -> Login? {
        TokenDigest(hex: key).flatMap { entries[$0]?.login }
            ?? archive?.record(key).map { Login(familyID: $0.familyID, userID: $0.userID, deviceID: $0.deviceID) }
    }

    /// Whether the client has used the pair this token came with (nil: no such token).
    func isConfirmed(_ key: String) -> Bool? { self[key].map { $0.confirmed == true } }

    /// Marks the pair of the token under `key` as in the client's hands.
    mutating func confirm(_ key: String) {
        guard let digest = TokenDigest(hex: key) else { return }
        if entries[digest] != nil {
            entries[digest]!.confirmed = true
            dirty.insert(digest)
        } else if var record = archive?.record(key) {
            record.confirmed = true
            archive?.put(record)
        }
    }

    /// Revokes the tokens not yet revoked of `owner`.
    mutating func revoke(_ owner: TokenOwner) {
        // The keys first: changing the table while going through it would copy all of it.
        let picked = entries.compactMap { digest, entry in
            entry.state != .revoked && owner.owns(user: entry.login.userID, device: entry.login.deviceID, family: entry.login.familyID) ? digest : nil
        }
        for digest in picked {
            entries[digest]!.state = .revoked
            if let archive {
                archive.put(record(digest, entries[digest]!))
                entries[digest] = nil
            } else {
                dirty.insert(digest)
            }
        }
        archive?.revoke(owner)
    }

    /// Forgets every token expired by `now`, whatever its state.
    mutating func removeExpired(now: Instant) {
        for digest in entries.filter({ $0.value.expiresAt <= now }).keys {
            entries[digest] = nil
            dirty.insert(digest)
        }
        archive?.removeExpired(now: now)
    }

    /// Loads a row without marking it changed (a key that is not a SHA-256 in hex names no
    /// token anyone could present, and is skipped).
    package mutating func load(_ key: String, _ value: RefreshRecord) {
        guard let digest = TokenDigest(hex: key) else { return }
        put(digest, value)
    }

    /// The rows changed since the last call, by key (nil: deleted).
    package mutating func takeDirty() -> [(String, RefreshRecord?)] {
        defer { dirty.removeAll() }
        return dirty.sorted().map { digest in (digest.hex, entries[digest].map { record(digest, $0) }) }
    }

    // MARK: Rows and entries

    func record(_ digest: TokenDigest, _ entry: Entry) -> RefreshRecord {
        RefreshRecord(tokenHash: digest.hex, familyID: entry.login.familyID, userID: entry.login.userID, deviceID: entry.login.deviceID,
                      expiresAt: entry.expiresAt, state: entry.state, rotatedAt: entry.rotatedAt, successor: entry.successor?.hex,
                      confirmed: entry.confirmed)
    }

    /// Stores a row. Its login is the one the token had, or its successor has, when that is
    /// the same; otherwise a new one (rows loaded before their successors get their own).
    mutating func put(_ digest: TokenDigest, _ value: RefreshRecord?) {
        guard let value else {
            entries[digest] = nil
            return
        }
        let successor = value.successor.flatMap(TokenDigest.init(hex:))
        let same = { (login: Login) in login.familyID == value.familyID && login.userID == value.userID && login.deviceID == value.deviceID }
        let login = [entries[digest]?.login, successor.flatMap { entries[$0]?.login }].lazy.compactMap { $0 }.first(where: same)
            ?? Login(familyID: value.familyID, userID: value.userID, deviceID: value.deviceID)
        entries[digest] = Entry(login: login, expiresAt: value.expiresAt, rotatedAt: value.rotatedAt, successor: successor,
                                state: value.state, confirmed: value.confirmed)
    }
}

/// Whose tokens a logout, a ban or a deleted device ends.
public enum TokenOwner: Sendable, Equatable {
    case family(String)
    case user(String)
    case device(String)

    func owns(user: String, device: String, family: String) -> Bool {
        switch self {
        case .family(let id): return family == id
        case .user(let id): return user == id
        case .device(let id): return device == id
        }
    }
}

/// Where a chat server can set aside the refresh tokens it keeps only to recognise them
/// if they come back (rotated or revoked ones, until they expire), as `MessageArchive`
/// holds older messages: outside the process's memory, answering at once.
public protocol RefreshTokenArchive: AnyObject, Sendable {
    /// Stores `record` under its `tokenHash`, replacing the one there.
    func put(_ record: RefreshRecord)
    func record(_ tokenHash: String) -> RefreshRecord?
    func removeToken(_ tokenHash: String)
    /// Marks every token of `owner` that is not yet revoked revoked.
    func revoke(_ owner: TokenOwner)
    /// Forgets every token expired by `now`.
    func removeExpired(now: Instant)
    var tokenCount: Int { get }
}

/// A SHA-256, held as four words: a key that costs no allocation.
public typealias TokenDigest = Bytes32
