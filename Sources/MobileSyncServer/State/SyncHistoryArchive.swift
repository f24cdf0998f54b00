/// Where a sync server can set aside the rows it keeps but seldom reads: finished
/// instances' statuses, closed approvals and acknowledged commands, outside the process's
/// memory (the simulator gives it a temporary SQLite file, `SQLiteSyncArchive`), as the
/// real server keeps them in its database.
///
/// A row goes there when it is finished, and what is finished hardly changes again: an
/// approval resolved or expired and a command acknowledged never do (retention only
/// forgets them); a finished status is replaced only by a newer report of its instance,
/// which brings it back to memory when that report is not a finished one. So the open
/// work a sync reads and writes stays in memory, and the archive is read only by the
/// lookups that must see everything (is this gate's approval already filed?) and by the
/// listings.
///
/// Every call answers at once; the core stays free of I/O waits. The archive is a
/// reference the state holds, so copies of the state share it: a row set aside after a
/// copy was taken is set aside for both. The simulator keeps one copy of a server's state,
/// so this never arises there; a driver that keeps older copies of a state must not give
/// it an archive. A failure to write is the driver's to report (the simulator ends the run
/// with it), not the core's.
public protocol SyncHistoryArchive: AnyObject, Sendable {
    /// Stores a finished status, replacing its instance's row.
    func put(_ status: StatusRecord)
    func status(device: String, instance: String) -> StatusRecord?
    func removeStatus(device: String, instance: String)
    /// A device's statuses set aside, in no particular order.
    func statuses(device: String) -> [StatusRecord]
    /// The newest `limit` statuses of `tenant` (every tenant's when nil), newest first by
    /// report time, then instance, then device (`StatusKey`).
    func newestStatuses(_ limit: Int, tenant: String?) -> [StatusRecord]
    func statusCount(tenant: String?) -> Int

    /// Stores a closed approval.
    func put(_ approval: ApprovalRecord)
    func approval(_ id: String) -> ApprovalRecord?
    /// The approval of a gate: the step `block` of `instance` on `device`.
    func approval(device: String, instance: String, block: String) -> ApprovalRecord?
    /// A device's approvals set aside, in no particular order.
    func approvals(device: String) -> [ApprovalRecord]
    /// The oldest `limit` approvals of `tenant` (every tenant's when nil) in `state` (any
    /// when nil), oldest first by creation time, then id (`ApprovalKey`).
    func oldestApprovals(_ limit: Int, tenant: String?, state: ApprovalRecord.State?) -> [ApprovalRecord]
    func approvalCount(tenant: String?, state: ApprovalRecord.State?) -> Int
    /// Forgets the approvals created before `createdAtMs`; returns their ids.
    func removeApprovals(createdBefore createdAtMs: Int64) -> [String]

    /// Stores an acknowledged command.
    func put(_ command: CommandRecord)
    /// Forgets the commands acknowledged before `ackedAtMs`; returns their ids.
    func removeCommands(ackedBefore ackedAtMs: Int64) -> [String]
}
