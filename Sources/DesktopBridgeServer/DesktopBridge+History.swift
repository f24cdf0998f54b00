public import DesktopBridgeWire
public import LabKernel

extension DesktopBridge {
    /// How many sessions `recentSessions` lists.
    public static let recentCount = 10

    /// `tinyvex/history.*`: the sessions and their updates as the desktop stored them,
    /// written in the caller's dialect (so a legacy and a current phone rebuild the same
    /// timeline, each in its own spelling).
    mutating func history(_ method: String, _ params: ACPParams, now: Instant, _ reply: inout DesktopReply) throws(RPCError) -> JSONValue {
        let d = params.dialect
        switch method {
        case "tinyvex/history.recentSessions":
            return .array(state.recent.prefix(Self.recentCount).map { record in
                d.object(["sessionId": .string(record.id), "lastTs": .number(Double(record.lastAt)),
                          "messageCount": .number(Double(state.history[record.id]?.count ?? 0))])
            })
        case "tinyvex/history.sessionTimeline":
            let session = try existing(params)
            let limit = try params.optionalInt("limit", in: 1...config.timelineLimit) ?? config.timelineLimit
            let entries = state.history[session.id] ?? []
            return .array(entries.suffix(limit).map { SessionNotification(sessionID: session.id, seq: $0.seq, update: $0.update).params(d) })
        case "tinyvex/history.deleteSession":
            let session = try existing(params)
            _ = cancel(session.id, now: now, &reply)
            state.apply(.deleteSession(session.id))
            reply.changes.append(.deleteSession(session.id))
            return ["deleted": true]
        case "tinyvex/history.setSessionTitle":
            var session = try existing(params)
            guard case .string(let title)? = params.value("title"), title.utf8.count <= 256 else {
                throw RPCError.invalidParams("'title' is a string of at most 256 bytes", field: "title")
            }
            session.title = title
            state.apply(.session(session))
            reply.changes.append(.session(session))
            return ["ok": true]
        case "tinyvex/history.getSessionTitle":
            let session = try existing(params)
            return ["title": session.title.map { .string($0) } ?? .null]
        case "tinyvex/history.clearSessionTitle":
            var session = try existing(params)
            session.title = nil
            state.apply(.session(session))
            reply.changes.append(.session(session))
            return ["ok": true]
        default:
            throw RPCError.methodNotFound(method)
        }
    }
}
