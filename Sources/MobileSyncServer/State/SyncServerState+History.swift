/// The sync server's finished rows, in memory or set aside into an archive.
///
/// Without an archive (the live driver, which has its database, and unit tests) every row
/// stays in memory, as the tables and orders of `SyncServerState`. With one, a row leaves
/// memory when it is finished: a status whose instance ended, an approval resolved or
/// expired, a command acknowledged. A day of a fleet's workflows files a few dozen of each
/// a phone, the largest thing the server holds, while what a sync reads and writes is the
/// open work: the running instances' statuses, the pending approvals, the commands still
/// to deliver. Rows leave memory as they are written (`put`), and are logged in `changes`
/// as before, so the answers and the change log are the same either way; the readers
/// here look in memory first and then in the archive, and the listings merge the two.
extension SyncServerState {
    /// Sets finished rows aside into `archive` from now on, and those already held.
    public mutating func setAside(into archive: any SyncHistoryArchive) {
        self.archive = archive
        for byInstance in statuses.values { for status in byInstance.values where status.isFinal { setAside(status, into: archive) } }
        for approval in approvals.values where approval.state != .pending { setAside(approval, into: archive) }
        for command in commands.values where command.ackedAtMs != nil { setAside(command, into: archive) }
    }

    mutating func setAside(_ status: StatusRecord, into archive: any SyncHistoryArchive) {
        if let held = statuses[status.deviceID]?[status.instanceID] {
            statusOrder.remove(held.orderKey, tenant: held.tenantID)
            statuses[status.deviceID]![status.instanceID] = nil
            if statuses[status.deviceID]!.isEmpty { statuses[status.deviceID] = nil }
        }
        archive.put(status)
    }

    mutating func setAside(_ approval: ApprovalRecord, into archive: any SyncHistoryArchive) {
        if let held = approvals.removeValue(forKey: approval.id) { unindex(held) }
        archive.put(approval)
    }

    mutating func setAside(_ command: CommandRecord, into archive: any SyncHistoryArchive) {
        if commands.removeValue(forKey: command.id) != nil, var pending = pendingByDevice[command.deviceID] {
            pending.removeAll { $0 == command.id }
            pendingByDevice[command.deviceID] = pending.isEmpty ? nil : pending
        }
        archive.put(command)
    }

    // MARK: Reads across memory and the archive

    /// The status of `instance` on `device`.
    public func status(device: String, instance: String) -> StatusRecord? {
        statuses[device]?[instance] ?? archive?.status(device: device, instance: instance)
    }

    /// The approval with that id.
    public func approval(_ id: String) -> ApprovalRecord? { approvals[id] ?? archive?.approval(id) }

    /// A device's statuses, in no particular order.
    func statuses(device: String) -> [StatusRecord] {
        Array((statuses[device] ?? [:]).values) + (archive?.statuses(device: device) ?? [])
    }

    /// A device's approvals, in no particular order.
    func approvals(device: String) -> [ApprovalRecord] {
        (approvalsByDevice[device] ?? []).compactMap { approvals[$0] } + (archive?.approvals(device: device) ?? [])
    }

    /// The newest `limit` statuses of `tenant` (every tenant's when nil), and how many it has.
    func newestStatuses(_ limit: Int, tenant: String?) -> (rows: [StatusRecord], total: Int) {
        let held = statusOrder.page(tenant: tenant, limit: limit, descending: true).compactMap { statuses[$0.deviceID]?[$0.instanceID] }
        let total = statusOrder.count(tenant: tenant)
        guard let archive else { return (held, total) }
        let merged = (held + archive.newestStatuses(limit, tenant: tenant)).sorted { $0.orderKey > $1.orderKey }
        return (Array(merged.prefix(limit)), total + archive.statusCount(tenant: tenant))
    }

    /// The oldest `limit` approvals of `tenant` (every tenant's when nil) in `state` (any
    /// when nil), and how many there are.
    func oldestApprovals(_ limit: Int, tenant: String?, state: ApprovalRecord.State?) -> (rows: [ApprovalRecord], total: Int) {
        let held = approvalOrder.page(tenant: tenant, state: state?.rawValue, limit: limit).compactMap { approvals[$0.id] }
        let total = approvalOrder.count(tenant: tenant, state: state?.rawValue)
        guard let archive, state != .pending else { return (held, total) }  // pending ones are all in memory
        let merged = (held + archive.oldestApprovals(limit, tenant: tenant, state: state)).sorted { $0.orderKey < $1.orderKey }
        return (Array(merged.prefix(limit)), total + archive.approvalCount(tenant: tenant, state: state))
    }

    // MARK: Retention

    /// Forgets the commands acknowledged before `cutoffMs`, in memory and set aside, in id
    /// order; returns their ids.
    mutating func removeCommands(ackedBefore cutoffMs: Int64) -> [String] {
        forget(commands.values.filter { ($0.ackedAtMs ?? .max) < cutoffMs }.map(\.id),
               setAside: archive?.removeCommands(ackedBefore: cutoffMs) ?? [],
               remove: { $0.remove(command: $1) }, logged: StoreChange.deleteCommand)
    }

    /// Forgets the closed approvals created before `cutoffMs`, in memory and set aside, in
    /// id order.
    mutating func removeApprovals(closedBefore cutoffMs: Int64) {
        forget(approvals.values.filter { $0.state != .pending && $0.createdAtMs < cutoffMs }.map(\.id),
               setAside: archive?.removeApprovals(createdBefore: cutoffMs) ?? [],
               remove: { $0.remove(approval: $1) }, logged: StoreChange.deleteApproval)
    }

    /// Removes the rows `held` in memory and logs the deletion of those the archive has
    /// already removed (`setAside`), all in id order, as one table's sweep would.
    @discardableResult
    private mutating func forget(_ held: [String], setAside: [String], remove: (inout Self, String) -> Void,
                                 logged: (String) -> StoreChange) -> [String] {
        let gone = Set(setAside)
        let ids = (held + setAside).sorted()
        for id in ids {
            if gone.contains(id) { changes.append(logged(id)) } else { remove(&self, id) }
        }
        return ids
    }
}

extension StatusRecord {
    /// Whether its instance has ended (the engine's terminal states, `InstanceState`): no
    /// later report is expected, so the row can leave memory.
    public var isFinal: Bool { Self.finalStates.contains(state) }

    static let finalStates: Set<String> = ["Completed", "Failed", "Cancelled", "completed", "failed", "cancelled"]
}
