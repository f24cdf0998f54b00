public import LabKernel
public import LabStore

/// A bounded, uniform sample of a run's notable events (reservoir sampling, Algorithm R).
///
/// The results keep at most `capacity` events however long the run, each event having the
/// same chance to be kept. Replacement decisions draw from the recorder's own stream, so
/// the sample is part of the deterministic results.
public struct EventSampler: Sendable {
    public let capacity: Int
    var kept: [EventSampleRow] = []
    var seen: Int64 = 0
    var generator: SeededGenerator

    public init(capacity: Int, seed: StreamSeed) {
        self.capacity = max(0, capacity)
        self.generator = seed.generator()
    }

    /// Offers an event; `detail` is built only if the event is kept.
    public mutating func offer(at: Instant, device: Int?, kind: String, detail: () -> String) {
        let sequence = seen
        seen += 1
        guard capacity > 0 else { return }
        if kept.count < capacity {
            kept.append(EventSampleRow(seq: sequence, at: at.nanoseconds, device: device, kind: kind, detail: detail()))
            return
        }
        let slot = generator.next(below: UInt64(sequence + 1))
        if slot < UInt64(capacity) {
            kept[Int(slot)] = EventSampleRow(seq: sequence, at: at.nanoseconds, device: device, kind: kind, detail: detail())
        }
    }

    public var offered: Int64 { seen }

    /// The kept events in the order they happened.
    public var rows: [EventSampleRow] { kept.sorted { $0.seq < $1.seq } }
}

/// Counts checks and violations of named invariants during a run.
public struct InvariantLedger: Sendable {
    public private(set) var rows: [InvariantResultRow] = []

    public init() {}

    /// The invariants that say something finishes in time (a send settles, every member
    /// reads within ten minutes, an outbox drains). They presume the servers keep up: past
    /// a server's saturation their failure means "overloaded", which a capacity sweep
    /// reports as a finding; every other invariant is a verdict at any load.
    public static let progressChecks: Set<String> = ["chat.every_member_device_decrypts", "chat.sends_settle", "sync.outbox_drained"]

    public mutating func register(_ name: String) -> Int {
        if let index = rows.firstIndex(where: { $0.name == name }) { return index }
        rows.append(InvariantResultRow(name: name, checks: 0, violations: 0, firstViolation: nil))
        return rows.count - 1
    }

    /// Counts one check of invariant `index`; `violation` is described only when it fails.
    public mutating func check(_ index: Int, _ holds: Bool, _ violation: @autoclosure () -> String) {
        rows[index].checks += 1
        guard !holds else { return }
        rows[index].violations += 1
        if rows[index].firstViolation == nil { rows[index].firstViolation = violation() }
    }

    /// Counts many checks at once (a pass over the whole fleet).
    public mutating func record(_ index: Int, checks: Int, violations: Int, first: String?) {
        rows[index].checks += Int64(checks)
        rows[index].violations += Int64(violations)
        if rows[index].firstViolation == nil, let first { rows[index].firstViolation = first }
    }

    public var allHold: Bool { rows.allSatisfy(\.passed) }
}

/// Checks of one invariant made in any order (a dictionary's), reported as a pass in the
/// order of their keys would report them: the same counts, and the violation of the
/// smallest key first. A pass over a large table needs no sorted copy of it.
struct UnorderedChecks<Key: Comparable> {
    var checks = 0
    var violations = 0
    /// The smallest key that violated, and what its violation says.
    var first: (key: Key, violation: String)?

    mutating func check(_ key: Key, _ holds: Bool, _ violation: @autoclosure () -> String) {
        checks += 1
        guard !holds else { return }
        violations += 1
        if first.map({ key < $0.key }) ?? true { first = (key, violation()) }
    }

    /// `count` checks that passed.
    mutating func passed(_ count: Int) { checks += count }

    /// Adds them to invariant `index` of `ledger`.
    func record(_ index: Int, into ledger: inout InvariantLedger) {
        ledger.record(index, checks: checks, violations: violations, first: first?.violation)
    }
}
