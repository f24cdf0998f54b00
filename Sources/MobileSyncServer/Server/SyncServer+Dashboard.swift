import LabKernel

/// The Mobile Sync page's sign-in: an API key typed into a form (posted in the body,
/// never in a URL) becomes a session whose token lives in an `HttpOnly; SameSite=Strict`
/// cookie, so the page's script never holds the key and no link or history entry carries
/// it. The server keeps only the token's SHA-256, in memory: a restart signs dashboards
/// out. A request the cookie authenticates may change state only with the
/// `x-fleetlab-dashboard` header, which the page's `fetch` sets and a form on another site
/// cannot (cross-site request forgery).
extension SyncServer {
    static let sessionCookie = "fleetlab_dashboard"
    static let dashboardHeader = "x-fleetlab-dashboard"
    static let sessionLifetime = TimeSpan.hours(12)
    /// At most this many sessions at once; the oldest is dropped past it.
    static let maxSessions = 1_000

    /// The dashboard's session routes, or nil for any other path. (The page itself is the
    /// live driver's: `Live/Pages/MobileSyncDashboardPage.swift`.)
    mutating func routeDashboard(_ request: HTTPRequestMessage, path: [String], now: Instant) throws -> HTTPResponseMessage? {
        guard path.count >= 3, path[0] == "dashboard", path[1] == "mobile-sync" else { return nil }
        switch Array(path.dropFirst(2)) {
        case ["session"]:
            if request.method == "GET" { return try describeSession(request, now: now) }
            try expect(request.method, "POST", request)
            return try signIn(request, now: now)
        case ["session", "end"]:
            try expect(request.method, "POST", request)
            return signOut(request)
        default:
            throw APIError(404, "not found", "no route for \(request.method) \(request.path)")
        }
    }

    /// `POST /dashboard/mobile-sync/session` with the form field `key` (or JSON `{"key"}`):
    /// 303 to the page with the session cookie, or 303 to `?signin=failed`.
    mutating func signIn(_ request: HTTPRequestMessage, now: Instant) throws -> HTTPResponseMessage {
        let key = Self.formField("key", in: request) ?? ""
        let caller: Caller
        if !config.authRequired {
            caller = Caller(tenant: "", isRoot: true)
        } else if let root = state.meta[Self.rootKeyMeta], !key.isEmpty, ConstantTimeText.equal(key, root) {
            caller = Caller(tenant: "", isRoot: true)
        } else if !key.isEmpty, let tenant = state.tenant(forKey: key) {
            caller = Caller(tenant: tenant, isRoot: false)
        } else {
            return .empty(303, headers: [HTTPHeader("Location", "/dashboard/mobile-sync?signin=failed")])
        }
        let token = randomToken(32)
        if state.dashboardSessions.count >= Self.maxSessions,
           let oldest = state.dashboardSessions.min(by: { ($0.value.expiresAt, $0.key) < ($1.value.expiresAt, $1.key) }) {
            state.dashboardSessions[oldest.key] = nil
        }
        state.dashboardSessions[Self.keyHash(token)] = DashboardSession(tenant: caller.tenant, isRoot: caller.isRoot,
                                                                        expiresAt: now + Self.sessionLifetime)
        let cookie = "\(Self.sessionCookie)=\(token); Path=/; HttpOnly; SameSite=Strict; Max-Age=\(Self.sessionLifetime.nanoseconds / 1_000_000_000)"
        return .empty(303, headers: [HTTPHeader("Location", "/dashboard/mobile-sync"), HTTPHeader("Set-Cookie", cookie)])
    }

    /// `POST /dashboard/mobile-sync/session/end`: forgets the session and clears the cookie.
    mutating func signOut(_ request: HTTPRequestMessage) -> HTTPResponseMessage {
        if let token = Self.cookie(Self.sessionCookie, in: request) { state.dashboardSessions[Self.keyHash(token)] = nil }
        return .empty(303, headers: [HTTPHeader("Location", "/dashboard/mobile-sync"),
                                     HTTPHeader("Set-Cookie", "\(Self.sessionCookie)=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0")])
    }

    /// `GET /dashboard/mobile-sync/session`: who the cookie signs in as, or 401.
    func describeSession(_ request: HTTPRequestMessage, now: Instant) throws -> HTTPResponseMessage {
        guard let session = try dashboardSession(request, now: now) else {
            if !config.authRequired { return .json(200, ["tenant_id": .null, "root": true, "auth": false]) }
            throw APIError(401, "unauthorized", "not signed in")
        }
        return .json(200, ["tenant_id": session.tenant.isEmpty ? .null : .string(session.tenant), "root": .bool(session.isRoot),
                           "auth": true])
    }

    /// The session the request's cookie names, if it is current. A state-changing request
    /// without the page's header is refused (403): only the page's own script may use it.
    func dashboardSession(_ request: HTTPRequestMessage, now: Instant) throws -> DashboardSession? {
        guard let token = Self.cookie(Self.sessionCookie, in: request),
              let session = state.dashboardSessions[Self.keyHash(token)], session.expiresAt > now else { return nil }
        if request.method != "GET" && request.method != "HEAD" && request.header(Self.dashboardHeader) == nil {
            throw APIError(403, "forbidden", "a signed-in dashboard changes state only from its own page")
        }
        return session
    }

    /// Sessions past their expiry are forgotten (retention).
    mutating func forgetExpiredSessions(now: Instant) {
        state.dashboardSessions = state.dashboardSessions.filter { $0.value.expiresAt > now }
    }

    static func cookie(_ name: String, in request: HTTPRequestMessage) -> String? {
        guard let header = request.header("cookie") else { return nil }
        for part in header.split(separator: ";") {
            let pair = part.split(separator: "=", maxSplits: 1)
            if pair.count == 2, String(pair[0]).trimmingWhitespace() == name { return String(pair[1]).trimmingWhitespace() }
        }
        return nil
    }

    /// A field of an `application/x-www-form-urlencoded` or JSON body.
    static func formField(_ name: String, in request: HTTPRequestMessage) -> String? {
        if request.header("content-type")?.lowercased().hasPrefix("application/json") == true {
            return (try? JSONValue.parse(bytes: request.body))?[name]?.stringValue
        }
        let form = HTTPRequestMessage(method: "POST", target: "/?" + String(decoding: request.body, as: UTF8.self))
        return form.query[name]
    }
}
