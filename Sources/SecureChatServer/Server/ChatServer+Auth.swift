import LabCrypto
import LabKernel

/// Who is calling, from a valid access token.
struct Caller {
    var userID: String
    var deviceID: String
    /// The login (refresh-token family) the token belongs to.
    var familyID: String
    var isAdmin: Bool
}

/// What a register or login waits for while its password work runs outside the lock.
enum PendingAuth: Sendable {
    case register(username: String, email: String?, displayName: String?, deviceName: String)
    /// `userID` nil: the username is unknown (the work ran on a dummy hash all the same).
    case login(userID: String?, username: String, deviceName: String)
}

extension ChatServer {
    // MARK: Accounts and tokens

    /// Phase one of a registration: every check that needs no hashing, then the job.
    mutating func register(_ request: HTTPRequestMessage, now: Instant) throws -> ChatStep {
        guard state.settings["registration_open"] != false else { throw ChatAPIError(403, "Registration is closed") }
        let f = try fields(request)
        let username: String, password: String, email: String?, displayName: String?, deviceName: String
        do {
            username = try f.string("username")
            password = try f.string("password")
            email = try f.optionalString("email")
            displayName = try f.optionalString("display_name")
            deviceName = try f.optionalString("device_name") ?? "default"
        } catch { throw ChatAPIError.field(error) }
        guard (3...64).contains(username.count), username.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_" || $0 == "-") }) else {
            throw ChatAPIError.validation(["body", "username"], "String should match pattern '^[A-Za-z0-9_-]{3,64}$'", type: "string_pattern_mismatch")
        }
        guard (8...128).contains(password.count) else {
            throw ChatAPIError.validation(["body", "password"], "String should have 8 to 128 characters", type: "string_too_short")
        }
        if let email, email.utf8.count > 254 { throw ChatAPIError.validation(["body", "email"], "String should have at most 254 characters", type: "string_too_long") }
        if let displayName, displayName.count > 128 {
            throw ChatAPIError.validation(["body", "display_name"], "String should have at most 128 characters", type: "string_too_long")
        }
        try checkDeviceName(deviceName)
        guard state.userIDByName[username.lowercased()] == nil else { throw ChatAPIError(409, "Username already taken") }
        return .password(job(.hash(password: password, salt: generator.bytes(PasswordHash.saltCount), cost: config.passwordCost),
                             pending: .register(username: username, email: email, displayName: displayName, deviceName: deviceName)))
    }

    /// Phase one of a login. An unknown username costs the same work as a known one (a
    /// dummy hash of the configured cost), so the answer's timing tells nothing; failed
    /// logins also draw from a bucket per account, so guessing from many addresses is
    /// slowed as well.
    mutating func login(_ request: HTTPRequestMessage, now: Instant) throws -> ChatStep {
        let f = try fields(request)
        let username: String, password: String, deviceName: String
        do {
            username = try f.string("username")
            password = try f.string("password")
            deviceName = try f.optionalString("device_name") ?? "default"
        } catch { throw ChatAPIError.field(error) }
        try checkDeviceName(deviceName)
        let key = username.lowercased()
        guard key.utf8.count <= 64 else { throw ChatAPIError(401, "Invalid credentials") }
        try rateLimit("login-failures:" + key, capacity: config.failedLoginsPerAccountPerMinute, now: now, consume: false)
        let user = state.userIDByName[key].flatMap { state.users[$0] }
        let encoded = user?.passwordHash ?? PasswordHash.unmatchable(cost: config.passwordCost)
        return .password(job(.verify(password: password, encoded: encoded), pending: .login(userID: user?.id, username: key, deviceName: deviceName)))
    }

    mutating func job(_ work: PasswordJob.Work, pending: PendingAuth) -> PasswordJob {
        let id = state.nextPasswordJob
        state.nextPasswordJob += 1
        state.pendingAuth[id] = pending
        return PasswordJob(id: id, work: work)
    }

    /// Phase two: the job's result finishes the request that asked for it.
    mutating func finishAuth(_ pending: PendingAuth, _ result: PasswordJob.Result, now: Instant) throws -> HTTPResponseMessage {
        switch (pending, result) {
        case (.register(let username, let email, let displayName, let deviceName), .hashed(let hash)):
            guard let hash else { throw ChatAPIError(500, "Internal server error") }
            // Someone may have taken the name while the hash was being made.
            guard state.userIDByName[username.lowercased()] == nil else { throw ChatAPIError(409, "Username already taken") }
            let user = ChatUser(id: newID(), username: username, email: email, displayName: displayName, passwordHash: hash,
                                role: state.users.isEmpty ? .admin : .member, standing: .active, createdAt: now)
            state.users[user.id] = user
            state.userIDByName[username.lowercased()] = user.id
            return .json(201, issueTokens(user: user, device: addDevice(user.id, name: deviceName, now: now), now: now).answer)
        case (.login(let userID, let username, let deviceName), .verified(let matches)):
            guard matches, let userID, let user = state.users[userID] else {
                try? rateLimit("login-failures:" + username, capacity: config.failedLoginsPerAccountPerMinute, now: now)
                throw ChatAPIError(401, "Invalid credentials")
            }
            try checkStanding(user, now: now)
            return .json(200, issueTokens(user: user, device: addDevice(userID, name: deviceName, now: now), now: now).answer)
        case (.register, .verified), (.login, .hashed):
            throw ChatAPIError(500, "Internal server error")
        }
    }

    func checkDeviceName(_ name: String) throws {
        guard (1...128).contains(name.count) else {
            throw ChatAPIError.validation(["body", "device_name"], "String should have 1 to 128 characters", type: "string_too_long")
        }
    }

    func checkStanding(_ user: ChatUser, now: Instant) throws {
        switch user.standing {
        case .active: return
        case .banned: throw ChatAPIError(403, "Account banned")
        case .suspended(let until):
            if now < until { throw ChatAPIError(403, "Account suspended until \(timestamp(until))") }
        }
    }

    mutating func addDevice(_ userID: String, name: String, now: Instant) -> String {
        let device = ChatDevice(id: newID(), userID: userID, name: name, deviceKeyPublic: nil, lastSeenAt: now, createdAt: now)
        state.devices[device.id] = device
        return device.id
    }

    /// A new token family for a login, or the next token of `login`'s family on refresh.
    /// Both kinds of token are stored by their SHA-256 only. Returns the answer, and the
    /// key the refresh token is stored under.
    mutating func issueTokens(user: ChatUser, device: String, login: RefreshTokenTable.Login? = nil, now: Instant) -> (answer: JSONValue, refreshKey: String) {
        let login = login ?? RefreshTokenTable.Login(familyID: newID(), userID: user.id, deviceID: device)
        let access = "at_" + generator.token(24), refresh = "rt_" + generator.token(32)
        let hash = Self.tokenKey(refresh)
        state.putAccessToken(Self.tokenKey(access), AccessRecord(userID: user.id, deviceID: device, familyID: login.familyID,
                                                                 expiresAt: now + config.accessTokenLifetime, refreshHash: hash))
        state.refreshTokens.issue(hash, login: login, expiresAt: now + config.refreshTokenLifetime)
        let answer: JSONValue = ["access_token": .string(access), "refresh_token": .string(refresh), "token_type": "bearer", "user_id": .string(user.id),
                                 "device_id": .string(device), "expires_in": .number(Double(config.accessTokenLifetime.nanoseconds / 1_000_000_000))]
        return (answer, hash)
    }

    /// The key a token is stored under: its SHA-256 in hex.
    static func tokenKey(_ token: String) -> String { SHA256.hash(token).hexString }

    /// Rotates a refresh token. Presenting one that was already rotated is reuse: the
    /// whole family is revoked (its access tokens and its sockets too) and the caller
    /// must log in again.
    mutating func refresh(_ request: HTTPRequestMessage, now: Instant, outputs: inout [ChatOutput]) throws -> HTTPResponseMessage {
        let token: String
        let f = try fields(request)
        do { token = try f.string("refresh_token") } catch { throw ChatAPIError.field(error) }
        let hash = Self.tokenKey(token)
        guard var record = state.refreshTokens[hash], now < record.expiresAt else { throw ChatAPIError(401, "Invalid refresh token") }
        switch record.state {
        case .revoked: throw ChatAPIError(401, "Invalid refresh token")
        case .rotated where isLostAnswerRetry(record, now: now):
            // The answer to the first rotation never arrived: rotate again from here.
            if let successor = record.successor { state.refreshTokens[successor]?.state = .revoked }
        case .rotated:
            revokeFamily(record.familyID, outputs: &outputs, reason: "Refresh token reuse detected")
            audit(now, actor: record.userID, "refresh_token_reuse", target: record.familyID, "a rotated refresh token was presented again")
            throw ChatAPIError(401, "Refresh token reuse detected; every session of this login is revoked")
        case .active: break
        }
        guard let user = state.users[record.userID], state.devices[record.deviceID] != nil else { throw ChatAPIError(401, "Invalid refresh token") }
        try checkStanding(user, now: now)
        state.removeAccessTokens(family: record.familyID)
        let (tokens, successor) = issueTokens(user: user, device: record.deviceID, login: state.refreshTokens.login(of: hash)
                                              ?? RefreshTokenTable.Login(familyID: record.familyID, userID: record.userID, deviceID: record.deviceID), now: now)
        record.state = .rotated
        record.rotatedAt = now
        record.successor = successor
        state.refreshTokens[hash] = record
        return .json(200, tokens)
    }

    /// A rotated token presented again soon after, whose successor pair was never used
    /// (neither refreshed nor its access token presented): the answer was lost.
    func isLostAnswerRetry(_ record: RefreshRecord, now: Instant) -> Bool {
        guard let rotatedAt = record.rotatedAt, now - rotatedAt <= config.refreshRetryGrace,
              let successor = record.successor.flatMap({ state.refreshTokens[$0] }) else { return false }
        return successor.state == .active && successor.confirmed != true
    }

    /// Ends one login everywhere: its tokens, its tickets and its open sockets.
    mutating func revokeFamily(_ familyID: String, outputs: inout [ChatOutput], reason: String) {
        revokeTokens(of: .family(familyID))
        state.tickets = state.tickets.filter { $0.value.familyID != familyID }
        outputs += closeConnections(code: 4003, reason: reason) { $0.familyID == familyID }
    }

    /// Revokes the refresh tokens and drops the access tokens of `owner`: a logout, a ban
    /// or a deleted device ends both kinds alike.
    mutating func revokeTokens(of owner: TokenOwner) {
        state.refreshTokens.revoke(owner)
        // The keys first: removing from the table while going through it would copy all of it.
        let picked = state.accessTokens.compactMap { key, token in owner.owns(user: token.userID, device: token.deviceID, family: token.familyID) ? key : nil }
        for key in picked { state.removeAccessToken(key) }
    }

    mutating func logout(_ request: HTTPRequestMessage, now: Instant, outputs: inout [ChatOutput]) throws -> HTTPResponseMessage {
        let token: String
        let f = try fields(request)
        do { token = try f.string("refresh_token") } catch { throw ChatAPIError.field(error) }
        if let record = state.refreshTokens[Self.tokenKey(token)] {
            revokeFamily(record.familyID, outputs: &outputs, reason: "Logged out")
        }
        return .empty(204)
    }

    mutating func logoutAll(_ caller: Caller, outputs: inout [ChatOutput]) -> HTTPResponseMessage {
        revokeAll(of: caller.userID, outputs: &outputs, reason: "Logged out")
        return .empty(204)
    }

    /// Revokes every token of a user and closes their sockets.
    mutating func revokeAll(of userID: String, outputs: inout [ChatOutput], reason: String) {
        revokeTokens(of: .user(userID))
        state.tickets = state.tickets.filter { $0.value.userID != userID }
        outputs += closeConnections(code: 4003, reason: reason) { $0.userID == userID }
    }

    mutating func wsTicket(_ caller: Caller, now: Instant) -> HTTPResponseMessage {
        let ticket = generator.token(24)
        state.tickets[ticket] = TicketRecord(userID: caller.userID, deviceID: caller.deviceID, familyID: caller.familyID,
                                             expiresAt: now + config.ticketLifetime)
        return .json(200, ["ticket": .string(ticket)])
    }

    /// `Authorization: Bearer <access token>`: 401 when missing, unknown or expired.
    mutating func authenticate(_ request: HTTPRequestMessage, now: Instant) throws -> Caller {
        guard let header = request.header("authorization"), header.lowercased().hasPrefix("bearer ") else {
            throw ChatAPIError(401, "Not authenticated", headers: [HTTPHeader("WWW-Authenticate", "Bearer")])
        }
        let key = Self.tokenKey(String(header.dropFirst(7)))
        guard let record = state.accessTokens[key] else { throw ChatAPIError(401, "Invalid token", headers: [HTTPHeader("WWW-Authenticate", "Bearer")]) }
        guard now < record.expiresAt else {
            state.removeAccessToken(key)
            throw ChatAPIError(401, "Token expired", headers: [HTTPHeader("WWW-Authenticate", "Bearer")])
        }
        guard let user = state.users[record.userID] else { throw ChatAPIError(401, "Invalid token") }
        if let refresh = record.refreshHash, state.refreshTokens.isConfirmed(refresh) == false {
            state.refreshTokens.confirm(refresh)  // the client has this pair
        }
        return Caller(userID: user.id, deviceID: record.deviceID, familyID: record.familyID, isAdmin: user.role == .admin)
    }

    func userJSON(_ user: ChatUser) -> JSONValue {
        ["id": .string(user.id), "username": .string(user.username), "email": user.email.map { .string($0) } ?? .null,
         "display_name": user.displayName.map { .string($0) } ?? .null, "role": .string(user.role.rawValue),
         "created_at": .string(timestamp(user.createdAt))]
    }

    /// A token bucket per key: `capacity` requests, refilled evenly over a minute. With
    /// `consume: false` it only checks that one is left. Keys are what a client cannot
    /// choose freely (an address, an account, a user pair), and buckets that have refilled
    /// are forgotten once there are many, so memory stays bounded by the keys active in
    /// the last minute.
    mutating func rateLimit(_ key: String, capacity: Int, now: Instant, consume: Bool = true) throws {
        if state.rateBuckets.count > 20_000 { state.rateBuckets = state.rateBuckets.filter { now - $0.value.updated < .minutes(1) } }
        let perSecond = Double(capacity) / 60
        var bucket = state.rateBuckets[key] ?? ChatServerState.RateBucket(tokens: Double(capacity), updated: now)
        let elapsed = Double(max(0, (now - bucket.updated).nanoseconds)) / 1e9
        bucket.tokens = min(Double(capacity), bucket.tokens + elapsed * perSecond)
        bucket.updated = now
        guard bucket.tokens >= 1 else {
            state.rateBuckets[key] = bucket
            let wait = Int(((1 - bucket.tokens) / perSecond).rounded(.up))
            throw ChatAPIError(429, "Rate limit exceeded", headers: [HTTPHeader("Retry-After", String(max(1, wait)))])
        }
        if consume { bucket.tokens -= 1 }
        state.rateBuckets[key] = bucket
    }

    mutating func audit(_ now: Instant, actor: String, _ action: String, target: String, _ detail: String) {
        state.audit.append(AuditEntry(at: now, actorID: actor, action: action, target: target, detail: detail))
    }
}
