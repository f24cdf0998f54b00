public import LabKernel
public import Orch8Wire

/// What waits in the outbox: the wire value itself, so a sync sends what was queued
/// without encoding and parsing it again (a SQLite store writes it as JSON and reads it
/// back typed, refusing a row it cannot read instead of dropping it).
public enum OutboxPayload: Equatable, Sendable {
    /// Coalesced per instance: only the latest state is sent.
    case status(StatusUpdate)
    /// Kept once per `instance:block`.
    case approval(ApprovalRequest)
    /// Kept once per `instance:block`.
    case delegation(StepDelegation)

    public var kind: OutboxEntry.Kind {
        switch self {
        case .status: return .status
        case .approval: return .approval
        case .delegation: return .delegation
        }
    }

    /// The slot it occupies in its kind: the instance for a status, `instance:block` else.
    public var key: String {
        switch self {
        case .status(let status): return status.instanceID
        case .approval(let approval): return approval.key
        case .delegation(let delegation): return delegation.key
        }
    }

    public var json: JSONValue {
        switch self {
        case .status(let status): return status.json
        case .approval(let approval): return approval.json
        case .delegation(let delegation): return delegation.json
        }
    }

    /// Reads what a store wrote with `json`.
    public init(kind: OutboxEntry.Kind, json: JSONValue) throws(JSONFieldError) {
        switch kind {
        case .status: self = .status(try StatusUpdate(json: json))
        case .approval: self = .approval(try ApprovalRequest(json: json))
        case .delegation: self = .delegation(try StepDelegation(json: json))
        }
    }
}

/// An entry waiting in the device's `sync_outbox` (the seed's Outbox Pattern): written in
/// the same transaction as the state it reports, removed once a sync carried it.
public struct OutboxEntry: Equatable, Sendable {
    public enum Kind: String, Sendable, CaseIterable {
        case status
        case approval
        case delegation
    }

    public let payload: OutboxPayload
    /// Write order; a rewrite gets a new one, so a batch in flight does not remove an
    /// entry written after it was read.
    public let seq: Int64
    /// The payload's kind and key, kept beside it: stores look entries up by them.
    /// (Read through the payload, `removeSent` also crashed Swift 6.3.1's optimizer.)
    public let kind: Kind
    public let key: String

    public init(payload: OutboxPayload, seq: Int64) {
        self.payload = payload
        self.seq = seq
        kind = payload.kind
        key = payload.key
    }
}

/// A stored outbox row that does not read back as its kind: the device's disk is
/// damaged. Sync stops with this error rather than send a request without the entry and
/// then remove it.
public struct OutboxUnreadable: Error, CustomStringConvertible {
    public var kind: OutboxEntry.Kind
    public var key: String
    public var reason: String

    public init(kind: OutboxEntry.Kind, key: String, reason: String) {
        self.kind = kind
        self.key = key
        self.reason = reason
    }

    public var description: String { "the outbox's \(kind.rawValue) entry \(key) is unreadable: \(reason)" }
}

/// The sync reporter's durable state beside the workflow state: the outbox, executed
/// command markers (which double as the acknowledgements still to send), and a few
/// values (manifest version, ETag, cached signing keys, delegations in flight).
///
/// Writes join the store's open batch (`begin`/`commit`), so a command's executed marker
/// commits with the instance change it caused, or neither does.
public protocol SyncOutboxStore {
    /// A status replaces the instance's previous one; an approval or delegation already
    /// queued for its key is kept.
    mutating func enqueue(_ payload: OutboxPayload) throws
    /// Oldest first.
    func outbox(_ kind: OutboxEntry.Kind, limit: Int) throws -> [OutboxEntry]
    func outboxCount() throws -> Int
    /// Removes the entries a successful sync carried, unless rewritten since.
    mutating func removeSent(_ entries: [OutboxEntry]) throws
    /// Records that a command ran (or was refused for good); its ack is pending until
    /// `acknowledged`.
    mutating func markExecuted(_ commandID: String, at: Instant) throws
    func isExecuted(_ commandID: String) throws -> Bool
    /// A command seen again (the server did not get the ack): ack it once more.
    mutating func reacknowledge(_ commandID: String) throws
    func pendingAcks(limit: Int) throws -> [String]
    mutating func acknowledged(_ commandIDs: [String]) throws
    /// Forgets markers older than `before` (the SDK keeps 30 days).
    mutating func pruneExecuted(before: Instant) throws
    func syncValue(_ key: String) throws -> String?
    mutating func setSyncValue(_ key: String, _ value: String?) throws
}
