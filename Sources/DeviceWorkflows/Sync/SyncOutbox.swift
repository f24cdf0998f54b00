public import LabKernel
import Orch8Wire

/// An entry waiting in the device's `sync_outbox` (the seed's Outbox Pattern): written in
/// the same transaction as the state it reports, removed once a sync carried it.
public struct OutboxEntry: Equatable, Sendable {
    public enum Kind: String, Sendable, CaseIterable {
        /// Coalesced per instance: only the latest state is sent.
        case status
        /// Kept once per `instance:block`.
        case approval
        /// Kept once per `instance:block`.
        case delegation
    }

    public var kind: Kind
    public var key: String
    public var payload: JSONValue
    /// Write order; a rewrite gets a new one, so a batch in flight does not remove an
    /// entry written after it was read.
    public var seq: Int64

    public init(kind: Kind, key: String, payload: JSONValue, seq: Int64) {
        self.kind = kind
        self.key = key
        self.payload = payload
        self.seq = seq
    }
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
    mutating func enqueue(_ kind: OutboxEntry.Kind, key: String, payload: JSONValue) throws
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
