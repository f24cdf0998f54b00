public import DesktopBridgeWire
public import LabKernel

/// What the desktop keeps across restarts (in `<data>/desktop-bridge.sqlite` live): its
/// sessions and every update each one broadcast, in order (the seed's Tinyvex history).
public struct DesktopState: Sendable, Equatable {
    public var sessions: [String: SessionRecord] = [:]
    public var history: [String: [HistoryEntry]] = [:]

    public init() {}

    /// Sessions newest first (by their last update, then id).
    public var recent: [SessionRecord] {
        sessions.values.sorted { ($0.lastAt, $0.id) > ($1.lastAt, $1.id) }
    }
}

public struct SessionRecord: Sendable, Equatable, Codable {
    public var id: String
    public var cwd: String
    public var mode: String
    public var title: String?
    /// Milliseconds since the Unix epoch, as `last_ts` reports them.
    public var createdAt: Int64
    public var lastAt: Int64

    public init(id: String, cwd: String, mode: String, title: String? = nil, createdAt: Int64, lastAt: Int64) {
        self.id = id
        self.cwd = cwd
        self.mode = mode
        self.title = title
        self.createdAt = createdAt
        self.lastAt = lastAt
    }
}

/// One broadcast update: its place in the session (from 1), when, and what.
public struct HistoryEntry: Sendable, Equatable {
    public var seq: Int
    public var at: Int64
    public var update: SessionUpdate

    public init(seq: Int, at: Int64, update: SessionUpdate) {
        self.seq = seq
        self.at = at
        self.update = update
    }
}

/// What a call changed, for the driver to commit before anything goes out.
public enum DesktopStoreChange: Sendable, Equatable {
    case session(SessionRecord)
    case event(sessionID: String, HistoryEntry)
    case deleteSession(String)
}

extension DesktopState {
    mutating func apply(_ change: DesktopStoreChange) {
        switch change {
        case .session(let record): sessions[record.id] = record
        case .event(let session, let entry): history[session, default: []].append(entry)
        case .deleteSession(let id):
            sessions[id] = nil
            history[id] = nil
        }
    }
}
