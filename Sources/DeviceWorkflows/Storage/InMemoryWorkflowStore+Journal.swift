import Orch8Wire
/// The in-memory store's handler journal: results in the order they were journaled.
///
/// A host journals one tick's results and forgets them in the next tick, in the same
/// order, so forgetting is nearly always "drop the oldest": a cursor moves and nothing is
/// hashed (a dictionary hashed each key twice, about a tenth of a step). Keys forgotten out
/// of that order (a deleted instance's, results restored after a relaunch) are found by a
/// scan, as are lookups, which only a relaunched host makes, for the keys it found. A key
/// is journaled at most once before it is forgotten (`WorkflowStore.journal`).
struct JournalLog: Sendable {
    struct Entry: Sendable {
        var key: InvocationKey
        var outcome: HandlerOutcome
    }

    /// What an operation did, for the store's undo log.
    enum Change: Sendable {
        case appended
        case advanced
        indirect case removed(Int, Entry)
    }

    private var entries: [Entry] = []
    /// Entries before `head` are forgotten (dropped for good by `compact`).
    private var head = 0

    var count: Int { entries.count - head }
    var keys: [InvocationKey] { entries[head...].map(\.key) }

    func outcome(_ key: InvocationKey) -> HandlerOutcome? { entries[head...].last { $0.key == key }?.outcome }

    mutating func append(_ key: InvocationKey, _ outcome: HandlerOutcome) -> Change {
        entries.append(Entry(key: key, outcome: outcome))
        return .appended
    }

    /// Forgets `key`; nil when it is not journaled.
    mutating func forget(_ key: InvocationKey) -> Change? {
        if head < entries.count && entries[head].key == key {
            head += 1
            return .advanced
        }
        guard let index = entries[head...].firstIndex(where: { $0.key == key }) else { return nil }
        return .removed(index, entries.remove(at: index))
    }

    mutating func undo(_ change: Change) {
        switch change {
        case .appended: entries.removeLast()
        case .advanced: head -= 1
        case .removed(let index, let entry): entries.insert(entry, at: index)
        }
    }

    /// Drops the forgotten entries once they are half the log; only when no undo log
    /// refers to positions in it.
    mutating func compact() {
        guard head >= 64 && head * 2 >= entries.count else { return }
        entries.removeFirst(head)
        head = 0
    }
}
