public import LabKernel

extension ChatServer {
    /// Forgets credentials past their use, once an hour, with the first request that finds
    /// the sweep due (its deletions are committed with that request's rows, as the sync
    /// server's retention sweep does).
    ///
    /// Without it nothing expired was ever forgotten: every refresh leaves a rotated refresh
    /// token (kept for reuse detection; a phone refreshing every fifteen minutes adds 96 a
    /// day), and a login abandoned without a logout leaves its access token, in the
    /// server's memory and database for good. What goes changes no answer:
    /// - an access token a day after it expired (within that day, presenting it still says
    ///   "Token expired", which a client reads as "refresh"; after it, "Invalid token",
    ///   the same 401);
    /// - a refresh token, whatever its state, once expired (refused as "Invalid refresh
    ///   token" either way);
    /// - a socket ticket once expired (closed with 4001 either way).
    mutating func forgetExpiredIfDue(now: Instant) {
        if let last = state.lastExpirySweep, now < last + Self.expirySweepEvery { return }
        state.lastExpirySweep = now
        forgetExpired(now: now)
    }

    static let expirySweepEvery = TimeSpan.hours(1)
    /// How long an expired access token is still told apart from an unknown one.
    static let expiredAccessTokenKept = TimeSpan.days(1)

    mutating func forgetExpired(now: Instant) {
        let accessCutoff = now - Self.expiredAccessTokenKept
        let access = state.accessTokens.rows.filter { $0.value.expiresAt <= accessCutoff }.map(\.key).sorted()
        for key in access { state.removeAccessToken(key) }
        state.refreshTokens.removeExpired(now: now)
        state.tickets = state.tickets.filter { now < $0.value.expiresAt }
    }
}
