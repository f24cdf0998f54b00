import LabKernel

extension ChatClient {
    // MARK: Issuing requests

    /// Issues a request; an authenticated one whose access token is known to have gone stale
    /// waits behind a refresh instead (as OAuth clients such as AppAuth do), so it costs no
    /// round trip that can only be answered 401.
    mutating func request(_ purpose: Purpose, _ method: String, _ path: String, _ body: JSONValue?, auth: Bool = true, now: Instant,
                          _ out: inout [ClientEffect]) {
        var bytes: [UInt8] = []
        body?.write(to: &bytes)
        var headers = body == nil ? [:] : ["content-type": "application/json"]
        if auth, let authorization { headers["authorization"] = authorization }
        let message = HTTPRequestMessage(method: method, target: "/api/v1" + path, headers: headers, body: bytes)
        let flight = InFlight(purpose: purpose, request: message, retried: false, deadline: now + config.requestTimeout)
        if auth, let staleAt = snapshot.accessTokenStaleAt, now >= staleAt, let refreshToken = snapshot.refreshToken {
            return park(flight, refreshToken: refreshToken, now: now, &out)
        }
        issue(flight, now: now, &out)
    }

    mutating func issue(_ flight: InFlight, now: Instant, _ out: inout [ClientEffect]) {
        let id = nextRequest
        nextRequest += 1
        var flight = flight
        flight.deadline = now + config.requestTimeout
        inFlight[id] = flight
        armRequestDeadline()
        out.append(.request(id: id, flight.request))
    }

    /// The `Authorization` header of the access token held now.
    var authorization: String? { snapshot.accessToken.map { "Bearer \($0)" } }

    /// Sends a request that got a 401 once more, with the access token held now; a 401 to
    /// that ends the session.
    mutating func retry(_ flight: InFlight, now: Instant, _ out: inout [ClientEffect]) {
        var again = flight
        again.retried = true
        again.request.headers["authorization"] = authorization ?? "Bearer "
        issue(again, now: now, &out)
    }

    /// Arms `.requests` at the earliest deadline in flight (or disarms it).
    mutating func armRequestDeadline() {
        if let earliest = inFlight.values.map(\.deadline).min() { timers.arm(.requests, at: earliest) } else { timers.cancel(.requests) }
    }

    /// Requests past their deadline count as failed in transit; a late answer is ignored.
    mutating func expireRequests(now: Instant, _ out: inout [ClientEffect]) {
        for id in inFlight.keys.sorted() where inFlight[id]!.deadline <= now {
            let flight = inFlight.removeValue(forKey: id)!
            stats.timeouts += 1
            failed(flight, now: now, &out)
        }
        armRequestDeadline()
    }

    /// A request that got no answer: what that means depends on what it was for.
    mutating func failed(_ flight: InFlight, now: Instant, _ out: inout [ClientEffect]) {
        switch flight.purpose {
        case .post, .edit, .members, .bundle, .deviceSet:
            // Retried later; a post keeps its client_message_id, so the server answers a
            // repeat with the first message.
            retrySend(after: .seconds(2), now: now)
        case .me, .ticket:
            socketLost(now: now, &out)
        case .refresh:
            refreshFailed(retryAfter: nil, now: now)
        case .channels:
            resyncChannels = true
            timers.arm(.resync, at: now + .seconds(5))
        case .messages(let channel):
            resyncPages.append(channel)
            timers.arm(.resync, at: now + .seconds(5))
        case .olderMessages(let channel):
            out.append(.historyLoaded(channelID: channel, added: 0, hasMore: true))
        case .logout, .logoutAll:
            break  // the session is already ended on this device
        case .register, .login, .uploadKeys, .replenish, .delete, .leave, .join, .removeDevice, .openDM, .createGroup, .addMember:
            out.append(.surfaced(.requestFailed(status: 0, detail: "no answer from the server")))
        }
    }

    mutating func retrySend(after delay: TimeSpan, now: Instant) {
        sendStage = .waitingRetry
        timers.arm(.sendRetry, at: now + delay)
    }

    // MARK: 401 and the refresh

    /// A 401 to an authenticated request: park it, and refresh once for all parked ones.
    /// A request sent with an access token that a finished refresh has since replaced (it
    /// was in flight beside the one whose 401 started the refresh) goes again with the new
    /// token instead: a second refresh would revoke the pair the first one just handed out,
    /// and with it the requests already retried with that pair.
    mutating func unauthorized(_ flight: InFlight, now: Instant, _ out: inout [ClientEffect]) {
        guard !flight.retried else { return logout("the server refused the refreshed token", &out) }
        guard let refreshToken = snapshot.refreshToken else { return logout("no refresh token", &out) }
        if refresh == .idle, let authorization, flight.request.headers["authorization"] != authorization {
            return retry(flight, now: now, &out)
        }
        park(flight, refreshToken: refreshToken, now: now, &out)
    }

    /// Holds a request until a refresh answers (starting one when none is under way); it
    /// then goes with the new token, or gives up after `parkLimit`.
    mutating func park(_ flight: InFlight, refreshToken: String, now: Instant, _ out: inout [ClientEffect]) {
        parked.append((flight, now + config.parkLimit))
        timers.arm(.parked, at: parked.map(\.until).min()!)
        guard refresh == .idle else { return }
        startRefresh(refreshToken, attempt: 1, now: now, &out)
    }

    mutating func startRefresh(_ token: String, attempt: Int, now: Instant, _ out: inout [ClientEffect]) {
        refresh = .inFlight(attempt: attempt)
        stats.refreshes += 1
        request(.refresh, "POST", "/auth/refresh", ["refresh_token": .string(token)], auth: false, now: now, &out)
    }

    /// The refresh answered. Only a 401 ends the session: 429, 5xx or anything else is
    /// tried again after a capped, jittered backoff (`Retry-After` honoured).
    mutating func refreshAnswered(_ response: HTTPResponseMessage, now: Instant, _ out: inout [ClientEffect]) {
        switch response.status {
        case 200:
            guard let body = response.jsonBody, body["access_token"]?.stringValue != nil else {
                return refreshFailed(retryAfter: nil, now: now)
            }
            refresh = .idle
            timers.cancel(.refreshRetry)
            tokens(body, now: now)
            let waiting = parked
            parked = []
            timers.cancel(.parked)
            for (flight, _) in waiting { retry(flight, now: now, &out) }
        case 401:
            logout("the refresh token was refused", &out)
        default:
            refreshFailed(retryAfter: response.header("Retry-After").flatMap(Int64.init).map { .seconds($0) }, now: now)
        }
    }

    mutating func refreshFailed(retryAfter: TimeSpan?, now: Instant) {
        let attempt: Int
        switch refresh {
        case .inFlight(let current), .backingOff(let current): attempt = current
        case .idle: attempt = 1
        }
        refresh = .backingOff(attempt: attempt)
        stats.refreshRetries += 1
        let base = min(config.refreshBackoffMax, .seconds(1) * Int64(1 << min(attempt - 1, 16)))
        var delay = TimeSpan.approximately(seconds: base.seconds * (0.5 + snapshot.generator.nextUnit()))
        if let retryAfter { delay = max(delay, retryAfter) }
        timers.arm(.refreshRetry, at: now + delay)
    }

    /// Parked requests that waited past `parkLimit` give up, each as if failed in transit.
    mutating func expireParked(now: Instant, _ out: inout [ClientEffect]) {
        let (due, waiting) = (parked.filter { $0.until <= now }, parked.filter { $0.until > now })
        parked = waiting
        if let next = parked.map(\.until).min() { timers.arm(.parked, at: next) } else { timers.cancel(.parked) }
        for (flight, _) in due {
            stats.timeouts += 1
            failed(flight, now: now, &out)
        }
    }

    // MARK: Sessions

    mutating func tokens(_ body: JSONValue, now: Instant) {
        snapshot.accessToken = body["access_token"]?.stringValue
        snapshot.refreshToken = body["refresh_token"]?.stringValue
        snapshot.accessTokenStaleAt = body["expires_in"]?.numberValue.flatMap { seconds in
            guard seconds.isFinite, seconds > 0, seconds < 1e9 else { return nil }
            let life = TimeSpan.approximately(seconds: seconds)
            return now + max(life - .minutes(1), TimeSpan(nanoseconds: life.nanoseconds / 2))
        }
    }

    static func detail(_ body: JSONValue?) -> String {
        body?["detail"]?.stringValue ?? body?["detail"]?.arrayValue?.first?["msg"]?.stringValue ?? ""
    }

    /// A clean logout: tokens gone, socket closed, nothing retried or waiting.
    mutating func logout(_ reason: String, _ out: inout [ClientEffect]) {
        snapshot.accessToken = nil
        snapshot.refreshToken = nil
        snapshot.accessTokenStaleAt = nil
        parked = []
        refresh = .idle
        inFlight = [:]
        timers = TimerTable()
        sendStage = .idle
        if socket == .open || socket == .opening { out.append(.closeSocket) }
        socket = .loggedOut
        out.append(.loggedOut(reason: reason))
    }

    /// Schedules a reconnect: 1 s doubling to 30 s, times 0.5…1.5 from the device's stream.
    mutating func socketLost(now: Instant, _ out: inout [ClientEffect]) {
        guard socket != .loggedOut else { return }
        socket = .closed
        reconnectAttempts += 1
        let base = min(30.0, Double(1 << min(reconnectAttempts - 1, 5)))
        let jitter = 0.5 + snapshot.generator.nextUnit()
        timers.arm(.reconnect, at: now + .milliseconds(Int64(base * jitter * 1000)))
    }
}
