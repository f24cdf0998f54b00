/// Named lists of keys kept in order, for the listings an operator's dashboard polls
/// (`GET /mobile/approvals?state=pending&limit=1` every 3 s): a page costs its own
/// length, never a scan and sort of the whole table under the server's lock. Each row is
/// filed under every list a query may name (all rows, its tenant's, each crossed with its
/// state), so the list a query needs is already in order; totals are the lists' lengths.
/// One device's rows are few, and sorted when asked for (`SyncServer.listApprovals`): lists
/// of their own cost a kilobyte a device, a gigabyte for a million phones.
struct OrderedIndex<Key: Comparable & Sendable>: Sendable, Equatable {
    private(set) var lists: [String: SortedChunks<Key>] = [:]

    mutating func insert(_ key: Key, into names: [String]) {
        for name in names {
            var list = lists.removeValue(forKey: name) ?? SortedChunks()
            list.insert(key)
            lists[name] = list
        }
    }

    mutating func remove(_ key: Key, from names: [String]) {
        for name in names {
            guard var list = lists.removeValue(forKey: name) else { continue }
            list.remove(key)
            if list.count > 0 { lists[name] = list }
        }
    }

    func count(_ name: String) -> Int { lists[name]?.count ?? 0 }

    /// The first `limit` keys of a list, oldest first, or newest first when `descending`.
    func page(_ name: String, limit: Int, descending: Bool = false) -> [Key] {
        lists[name]?.prefix(limit, descending: descending) ?? []
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

enum ListName {
    static let all = "*"
    static func tenant(_ id: String) -> String { "t:" + id }
    /// `scope`, limited to one state (approvals).
    static func scope(_ scope: String, state: String) -> String { scope + "|" + state }

    /// The lists a row of `tenant` is filed under (and crossed with `state`).
    static func lists(tenant: String, state: String? = nil) -> [String] {
        let scopes = [all, Self.tenant(tenant)]
        guard let state else { return scopes }
        return scopes + scopes.map { scope($0, state: state) }
    }
}
