import LabCrypto
import LabKernel

/// Who is calling, from a valid access token.
struct Caller {
    var userID: String
    var deviceID: String
    var isAdmin: Bool
}

extension ChatServer {
    // MARK: Accounts and tokens

    mutating func register(_ request: HTTPRequestMessage, now: Instant) throws -> HTTPResponseMessage {
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
        try checkDeviceName(deviceName)
        guard state.userIDByName[username.lowercased()] == nil else { throw ChatAPIError(409, "Username already taken") }
        let hash: String
        do { hash = try PasswordHash.hash(password, salt: generator.bytes(PasswordHash.saltCount), cost: config.passwordCost) } catch {
            throw ChatAPIError(500, "Internal server error")
        }
        let user = ChatUser(id: newID(), username: username, email: email, displayName: displayName, passwordHash: hash,
                            role: state.users.isEmpty ? .admin : .member, standing: .active, createdAt: now)
        state.users[user.id] = user
        state.userIDByName[username.lowercased()] = user.id
        return .json(201, issueTokens(user: user, device: addDevice(user.id, name: deviceName, now: now), now: now))
    }

    /// Every login is a new device, as in d3chat; a banned or suspended account is refused here.
    mutating func login(_ request: HTTPRequestMessage, now: Instant) throws -> HTTPResponseMessage {
        let f = try fields(request)
        let username: String, password: String, deviceName: String
        do {
            username = try f.string("username")
            password = try f.string("password")
            deviceName = try f.optionalString("device_name") ?? "default"
        } catch { throw ChatAPIError.field(error) }
        try checkDeviceName(deviceName)
        guard let id = state.userIDByName[username.lowercased()], let user = state.users[id],
              PasswordHash.verify(password, encoded: user.passwordHash) else { throw ChatAPIError(401, "Invalid credentials") }
        try checkStanding(user, now: now)
        return .json(200, issueTokens(user: user, device: addDevice(id, name: deviceName, now: now), now: now))
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

    /// A new token family for a login, or the next token of `family` on refresh.
    mutating func issueTokens(user: ChatUser, device: String, family: String? = nil, now: Instant) -> JSONValue {
        let familyID = family ?? newID()
        let access = "at_" + generator.token(24), refresh = "rt_" + generator.token(32)
        state.accessTokens[access] = AccessRecord(userID: user.id, deviceID: device, familyID: familyID, expiresAt: now + config.accessTokenLifetime)
        let hash = SHA256.hash(refresh).hexString
        state.refreshTokens[hash] = RefreshRecord(tokenHash: hash, familyID: familyID, userID: user.id, deviceID: device,
                                                  expiresAt: now + config.refreshTokenLifetime, state: .active)
        return ["access_token": .string(access), "refresh_token": .string(refresh), "token_type": "bearer", "user_id": .string(user.id),
                "device_id": .string(device), "expires_in": .number(Double(config.accessTokenLifetime.nanoseconds / 1_000_000_000))]
    }

    /// Rotates a refresh token. Presenting one that was already rotated is reuse: the
    /// whole family is revoked (its access tokens too) and the caller must log in again.
    mutating func refresh(_ request: HTTPRequestMessage, now: Instant) throws -> HTTPResponseMessage {
        let token: String
        let f = try fields(request)
        do { token = try f.string("refresh_token") } catch { throw ChatAPIError.field(error) }
        let hash = SHA256.hash(token).hexString
        guard var record = state.refreshTokens[hash], now < record.expiresAt else { throw ChatAPIError(401, "Invalid refresh token") }
        switch record.state {
        case .revoked: throw ChatAPIError(401, "Invalid refresh token")
        case .rotated:
            revokeFamily(record.familyID)
            audit(now, actor: record.userID, "refresh_token_reuse", target: record.familyID, "a rotated refresh token was presented again")
            throw ChatAPIError(401, "Refresh token reuse detected; every session of this login is revoked")
        case .active: break
        }
        guard let user = state.users[record.userID], state.devices[record.deviceID] != nil else { throw ChatAPIError(401, "Invalid refresh token") }
        try checkStanding(user, now: now)
        record.state = .rotated
        state.refreshTokens[hash] = record
        state.accessTokens.removeAll { $0.familyID == record.familyID }
        return .json(200, issueTokens(user: user, device: record.deviceID, family: record.familyID, now: now))
    }

    mutating func revokeFamily(_ familyID: String) { revokeTokens { _, _, family in family == familyID } }

    /// Revokes the refresh tokens and drops the access tokens that `pick` selects by
    /// (user, device, family): a logout, a ban or a deleted device ends both kinds alike.
    mutating func revokeTokens(where pick: (_ user: String, _ device: String, _ family: String) -> Bool) {
        for (key, record) in state.refreshTokens where pick(record.userID, record.deviceID, record.familyID) {
            state.refreshTokens[key]?.state = .revoked
        }
        state.accessTokens.removeAll { pick($0.userID, $0.deviceID, $0.familyID) }
    }

    mutating func logout(_ request: HTTPRequestMessage, now: Instant, outputs: inout [ChatOutput]) throws -> HTTPResponseMessage {
        let token: String
        let f = try fields(request)
        do { token = try f.string("refresh_token") } catch { throw ChatAPIError.field(error) }
        if let record = state.refreshTokens[SHA256.hash(token).hexString] {
            revokeFamily(record.familyID)
            closeConnections { $0.deviceID == record.deviceID }.forEach { outputs.append($0) }
        }
        return .empty(204)
    }

    mutating func logoutAll(_ caller: Caller, outputs: inout [ChatOutput]) -> HTTPResponseMessage {
        revokeAll(of: caller.userID, outputs: &outputs, reason: "Logged out")
        return .empty(204)
    }

    /// Revokes every token of a user and closes their sockets.
    mutating func revokeAll(of userID: String, outputs: inout [ChatOutput], reason: String) {
        revokeTokens { user, _, _ in user == userID }
        state.tickets = state.tickets.filter { $0.value.userID != userID }
        outputs += closeConnections(code: 4003, reason: reason) { $0.userID == userID }
    }

    mutating func wsTicket(_ caller: Caller, now: Instant) -> HTTPResponseMessage {
        let ticket = generator.token(24)
        state.tickets[ticket] = TicketRecord(userID: caller.userID, deviceID: caller.deviceID, expiresAt: now + config.ticketLifetime)
        return .json(200, ["ticket": .string(ticket)])
    }

    /// `Authorization: Bearer <access token>`: 401 when missing, unknown or expired.
    mutating func authenticate(_ request: HTTPRequestMessage, now: Instant) throws -> Caller {
        guard let header = request.header("authorization"), header.lowercased().hasPrefix("bearer ") else {
            throw ChatAPIError(401, "Not authenticated", headers: [HTTPHeader("WWW-Authenticate", "Bearer")])
        }
        let token = String(header.dropFirst(7))
        guard let record = state.accessTokens[token] else { throw ChatAPIError(401, "Invalid token", headers: [HTTPHeader("WWW-Authenticate", "Bearer")]) }
        guard now < record.expiresAt else {
            state.accessTokens[token] = nil
            throw ChatAPIError(401, "Token expired", headers: [HTTPHeader("WWW-Authenticate", "Bearer")])
        }
        guard let user = state.users[record.userID] else { throw ChatAPIError(401, "Invalid token") }
        return Caller(userID: user.id, deviceID: record.deviceID, isAdmin: user.role == .admin)
    }

    func userJSON(_ user: ChatUser) -> JSONValue {
        ["id": .string(user.id), "username": .string(user.username), "email": user.email.map { .string($0) } ?? .null,
         "display_name": user.displayName.map { .string($0) } ?? .null, "role": .string(user.role.rawValue),
         "created_at": .string(timestamp(user.createdAt))]
    }

    /// A token bucket per key: `capacity` requests, refilled evenly over a minute.
    mutating func rateLimit(_ key: String, capacity: Int, now: Instant) throws {
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
        bucket.tokens -= 1
        state.rateBuckets[key] = bucket
    }

    mutating func audit(_ now: Instant, actor: String, _ action: String, target: String, _ detail: String) {
        state.audit.append(AuditEntry(at: now, actorID: actor, action: action, target: target, detail: detail))
    }
}
