/// Lists of keys kept in order, for the listings an operator's dashboard polls
/// (`GET /mobile/approvals?state=pending&limit=1` every 3 s): a page costs its own
/// length, never a scan and sort of the whole table under the server's lock. Each row is
/// filed under its tenant's list and, where rows have states, its tenant's list of that
/// state, so the list a tenant's query needs is already in order; totals are the lists'
/// lengths. A query across every tenant (the root key's) merges the tenants' pages: they
/// are few, and filing every row under an all-tenants list as well kept each key twice
/// (half of the index, a few percent of a day's memory).
/// One device's rows are few, and sorted when asked (`SyncServer.listApprovals`): lists
/// of their own cost a kilobyte a device, a gigabyte for a million phones.
struct OrderedIndex<Key: Comparable & Sendable>: Sendable, Equatable {
    /// A list: one tenant's rows, or those of one state.
    struct ListKey: Hashable, Sendable {
        var tenant: String
        var state: String?
    }

    private(set) var lists: [ListKey: SortedChunks<Key>] = [:]

    /// Files `key` under its tenant's list and, with a `state`, that state's.
    mutating func insert(_ key: Key, tenant: String, state: String? = nil) {
        insert(key, into: ListKey(tenant: tenant))
        if let state { insert(key, into: ListKey(tenant: tenant, state: state)) }
    }

    mutating func remove(_ key: Key, tenant: String, state: String? = nil) {
        remove(key, from: ListKey(tenant: tenant))
        if let state { remove(key, from: ListKey(tenant: tenant, state: state)) }
    }

    private mutating func insert(_ key: Key, into name: ListKey) {
        var list = lists.removeValue(forKey: name) ?? SortedChunks()
        list.insert(key)
        lists[name] = list
    }

    private mutating func remove(_ key: Key, from name: ListKey) {
        guard var list = lists.removeValue(forKey: name) else { return }
        list.remove(key)
        if list.count > 0 { lists[name] = list }
    }

    /// The lists a query reads: `tenant`'s, or every tenant's when nil.
    private func lists(tenant: String?, state: String?) -> [SortedChunks<Key>] {
        if let tenant { return lists[ListKey(tenant: tenant, state: state)].map { [$0] } ?? [] }
        return lists.filter { $0.key.state == state }.map(\.value)
    }

    func count(tenant: String?, state: String? = nil) -> Int {
        lists(tenant: tenant, state: state).reduce(0) { $0 + $1.count }
    }

    /// The first `limit` keys, oldest first, or newest first when `descending`; across
    /// tenants, the first `limit` of their pages merged.
    func page(tenant: String?, state: String? = nil, limit: Int, descending: Bool = false) -> [Key] {
        let pages = lists(tenant: tenant, state: state).map { $0.prefix(limit, descending: descending) }
        guard pages.count > 1 else { return pages.first ?? [] }
        let merged = pages.joined().sorted { descending ? $1 < $0 : $0 < $1 }
        return Array(merged.prefix(limit))
    }
}

/// A sorted multiset of keys as a list of sorted chunks of at most `maxChunk`: finding a
/// key is two binary searches, and inserting or removing one moves at most a chunk's
/// worth of elements (a plain sorted array would move half the table: a status updated
/// from the middle of a 100,000-row listing).
struct SortedChunks<Key: Comparable & Sendable>: Sendable, Equatable {
    static var maxChunk: Int { 512 }
    private var chunks: [[Key]] = []
    private(set) var count = 0

    /// The chunk a key belongs in: the first whose last element is not before it.
    private func chunkIndex(for key: Key) -> Int {
        var low = 0, high = chunks.count
        while low < high {
            let mid = (low + high) / 2
            if chunks[mid][chunks[mid].count - 1] < key { low = mid + 1 } else { high = mid }
        }
        return low
    }

    private static func position(of key: Key, in chunk: [Key]) -> Int {
        var low = 0, high = chunk.count
        while low < high {
            let mid = (low + high) / 2
            if chunk[mid] < key { low = mid + 1 } else { high = mid }
        }
        return low
    }

    mutating func insert(_ key: Key) {
        count += 1
        guard !chunks.isEmpty else { chunks = [[key]]; return }
        let c = min(chunkIndex(for: key), chunks.count - 1)
        chunks[c].insert(key, at: Self.position(of: key, in: chunks[c]))
        if chunks[c].count > 2 * Self.maxChunk {
            // Both halves as copies of their own length: trimmed in place, the lower half
            // would keep the whole chunk's capacity, and keys mostly arrive at the end
            // (creation times), so every chunk but the last would stay half empty.
            let upper = Array(chunks[c][Self.maxChunk...])
            chunks[c] = Array(chunks[c][..<Self.maxChunk])
            chunks.insert(upper, at: c + 1)
        }
    }

    mutating func remove(_ key: Key) {
        let c = chunkIndex(for: key)
        guard c < chunks.count else { return }
        let at = Self.position(of: key, in: chunks[c])
        guard at < chunks[c].count, chunks[c][at] == key else { return }
        chunks[c].remove(at: at)
        count -= 1
        if chunks[c].isEmpty { chunks.remove(at: c) }
    }

    /// The smallest key.
    var first: Key? { chunks.first?.first }

    func prefix(_ limit: Int, descending: Bool) -> [Key] {
        var out: [Key] = []
        out.reserveCapacity(min(limit, count))
        if descending {
            for chunk in chunks.reversed() {
                for key in chunk.reversed() {
                    guard out.count < limit else { return out }
                    out.append(key)
                }
            }
        } else {
            for chunk in chunks {
                for key in chunk {
                    guard out.count < limit else { return out }
                    out.append(key)
                }
            }
        }
        return out
    }
}

/// An approval's place in the listings: creation time, then id.
struct ApprovalKey: Comparable, Sendable {
    var createdAtMs: Int64
    var id: String
    static func < (a: ApprovalKey, b: ApprovalKey) -> Bool { (a.createdAtMs, a.id) < (b.createdAtMs, b.id) }
}

/// A status's place: the device's report time, then instance (listed newest first).
struct StatusKey: Comparable, Sendable {
    var reportedAtMs: Int64
    var instanceID: String
    var deviceID: String
    static func < (a: StatusKey, b: StatusKey) -> Bool {
        (a.reportedAtMs, a.instanceID, a.deviceID) < (b.reportedAtMs, b.instanceID, b.deviceID)
    }
}

/// When a pending approval with a timeout expires.
struct ExpiryKey: Comparable, Sendable {
    var deadlineMs: Int64
    var id: String
    static func < (a: ExpiryKey, b: ExpiryKey) -> Bool { (a.deadlineMs, a.id) < (b.deadlineMs, b.id) }
}
