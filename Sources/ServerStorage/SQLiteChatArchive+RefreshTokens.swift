public import LabKernel
import LabStore
public import SecureChatServer

/// The refresh tokens a chat server keeps only to recognise them if they come back: rows
/// of `refresh_tokens`, by the token's hash, with who they belong to beside it so a
/// logout, a ban or a deleted device revokes them in one statement.
extension SQLiteChatArchive {
    static let tokenSchema = """
        CREATE TABLE refresh_tokens (hash TEXT PRIMARY KEY, family TEXT NOT NULL, user TEXT NOT NULL, device TEXT NOT NULL,
                                     expires_at INTEGER NOT NULL, state TEXT NOT NULL, rotated_at INTEGER, successor TEXT, confirmed INTEGER);
        CREATE INDEX refresh_tokens_by_family ON refresh_tokens (family);
        CREATE INDEX refresh_tokens_by_user ON refresh_tokens (user);
        CREATE INDEX refresh_tokens_by_device ON refresh_tokens (device);
        CREATE INDEX refresh_tokens_by_expiry ON refresh_tokens (expires_at);
        """

    public func put(_ record: RefreshRecord) {
        attempt {
            let statement = try database.statement(static: """
                INSERT OR REPLACE INTO refresh_tokens (hash, family, user, device, expires_at, state, rotated_at, successor, confirmed)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                """)
            try statement.bind([.text(record.tokenHash), .text(record.familyID), .text(record.userID), .text(record.deviceID),
                                .integer(record.expiresAt.nanoseconds), .text(Self.name(record.state)),
                                record.rotatedAt.map { .integer($0.nanoseconds) } ?? .null, SQLiteValue.textOrNull(record.successor),
                                record.confirmed.map { .integer($0 ? 1 : 0) } ?? .null])
            try statement.execute()
        }
    }

    public func record(_ tokenHash: String) -> RefreshRecord? {
        attempt { try token(tokenHash) } ?? nil
    }

    public func removeToken(_ tokenHash: String) {
        attempt {
            try file.run("DELETE FROM refresh_tokens WHERE hash = ?", [.text(tokenHash)])
        }
    }

    public func revoke(_ owner: TokenOwner) {
        attempt {
            switch owner {
            case .family(let id): try database.run("UPDATE refresh_tokens SET state = 'revoked' WHERE family = ? AND state != 'revoked'", [.text(id)])
            case .user(let id): try database.run("UPDATE refresh_tokens SET state = 'revoked' WHERE user = ? AND state != 'revoked'", [.text(id)])
            case .device(let id): try database.run("UPDATE refresh_tokens SET state = 'revoked' WHERE device = ? AND state != 'revoked'", [.text(id)])
            }
        }
    }

    public func removeExpired(now: Instant) {
        attempt {
            try file.run("DELETE FROM refresh_tokens WHERE expires_at <= ?", [.integer(now.nanoseconds)])
        }
    }

    // MARK: Rows

    func token(_ hash: String) throws -> RefreshRecord? {
        let statement = try database.statement(static: """
            SELECT hash, family, user, device, expires_at, state, rotated_at, successor, confirmed FROM refresh_tokens WHERE hash = ?
            """)
        try statement.bind([.text(hash)])
        defer { statement.reset() }
        guard try statement.step() else { return nil }
        return RefreshRecord(tokenHash: statement.string(at: 0) ?? "", familyID: statement.string(at: 1) ?? "", userID: statement.string(at: 2) ?? "",
                             deviceID: statement.string(at: 3) ?? "", expiresAt: Instant(nanoseconds: statement.int64(at: 4)),
                             state: Self.state(statement.string(at: 5)),
                             rotatedAt: statement.value(at: 6) == .null ? nil : Instant(nanoseconds: statement.int64(at: 6)),
                             successor: statement.string(at: 7), confirmed: statement.value(at: 8) == .null ? nil : statement.int64(at: 8) != 0)
    }

    static func name(_ state: RefreshRecord.State) -> String {
        switch state {
        case .active: return "active"
        case .rotated: return "rotated"
        case .revoked: return "revoked"
        }
    }

    /// The state a row names (only this file writes them).
    static func state(_ name: String?) -> RefreshRecord.State {
        switch name {
        case "active": return .active
        case "rotated": return .rotated
        default: return .revoked
        }
    }
}
