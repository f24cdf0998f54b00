public import LabKernel

/// How long the sync server keeps what is finished. Pending work (unacknowledged
/// commands, pending approvals) is never pruned; what a device or operator has closed is
/// kept long enough to be looked at, then forgotten, so the database and the memory that
/// mirrors it stop growing with the fleet's age.
public struct SyncRetention: Sendable, Equatable {
    /// Commands the device acknowledged, counted from the acknowledgement.
    public var acknowledgedCommands = TimeSpan.days(7)
    /// Approvals resolved or expired, counted from their creation.
    public var closedApprovals = TimeSpan.days(30)
    /// Telemetry, counted from its arrival.
    public var telemetry = TimeSpan.days(30)
    /// How often the sweep runs (on the first request after this much time).
    public var sweepEvery = TimeSpan.hours(1)

    public init() {}
}

extension SyncServer {
    /// Runs the retention sweep when one is due: a request pays for it at most once per
    /// `sweepEvery`, and its deletions are committed with that request's rows.
    mutating func pruneIfDue(now: Instant) {
        if let last = state.lastPrune, now < last + config.retention.sweepEvery { return }
        state.lastPrune = now
        prune(now: now)
    }

    /// Forgets acknowledged commands (and the delegation markers that pointed at them),
    /// closed approvals and telemetry older than their retention, and expired dashboard
    /// sessions.
    mutating func prune(now: Instant) {
        let nowMs = unixMs(now)
        let retention = config.retention
        let commandCutoff = nowMs - retention.acknowledgedCommands.nanoseconds / 1_000_000
        let spent = state.removeCommands(ackedBefore: commandCutoff)
        if !spent.isEmpty {
            let gone = Set(spent)
            let markers = state.meta.filter { $0.key.hasPrefix("delegation|") && gone.contains($0.value) }.map(\.key).sorted()
            for key in markers { state.removeMeta(key) }
        }
        let approvalCutoff = nowMs - retention.closedApprovals.nanoseconds / 1_000_000
        state.removeApprovals(closedBefore: approvalCutoff)
        state.pruneTelemetry(before: nowMs - retention.telemetry.nanoseconds / 1_000_000)
        forgetExpiredSessions(now: now)
    }
}
