import LabKernel

/// What users sent in a chat run, for the delivery checks: when each message was sent,
/// and, until it is acknowledged and read by every device that should read it, who still
/// has to.
///
/// A message's text names it: `u<user>.d<ordinal>.<number>`, its sender's ordinal and its
/// number among that device's sends. So the send times are kept by sender and number, 8
/// bytes a message for the whole run, and only a message still open keeps a record with
/// its readers. A day of a large fleet sends hundreds of thousands of messages and almost
/// all of them are done within minutes; a record for each, kept to the end, was a tenth of
/// the chat stack's memory.
struct SentMessages {
    /// A message still waiting for its acknowledgement or a reader.
    struct Open {
        var at: Instant
        var group: Bool
        var channel: String
        var acked = false
        var pending: Set<Int>
    }

    /// What a copy of a message reaching a device means for the checks.
    enum Arrival: Equatable {
        /// Not a message a user sent, or one no longer expected (deleted, or dropped with
        /// its sender's outbox).
        case unexpected
        /// The sender's acknowledgement, or a reader's first copy: a latency to record.
        case acknowledged(sentAt: Instant, group: Bool)
        case read(sentAt: Instant, group: Bool)
        /// Nothing new: a copy seen before, or one for a device not among its readers.
        case again(sentAt: Instant)

        /// When the message was sent; nil for one not expected.
        var sentAt: Instant? {
            switch self {
            case .unexpected: return nil
            case .acknowledged(let at, _), .read(let at, _), .again(let at): return at
            }
        }
    }

    /// Send times by sender ordinal, then by number - 1. A message no longer expected has
    /// `Self.gone`: no send happens at the run's start (users talk after provisioning).
    private var times: [[Instant]] = []
    private static let gone = Instant.zero
    /// The messages still open, by text.
    private(set) var open: [String: Open] = [:]

    /// Records a message the device with `ordinal` sends now, and returns its text.
    mutating func send(user: Int, ordinal: Int, at now: Instant, group: Bool, channel: String, readers: Set<Int>) -> String {
        while times.count <= ordinal { times.append([]) }
        times[ordinal].append(now)
        let text = "u\(user).d\(ordinal).\(times[ordinal].count)"
        open[text] = Open(at: now, group: group, channel: channel, pending: readers)
        return text
    }

    /// The sender ordinal and number a message text names, if it is a user's message.
    static func number(of text: String) -> (ordinal: Int, number: Int)? {
        let parts = text.split(separator: ".")
        guard parts.count == 3, parts[1].first == "d", let ordinal = Int(parts[1].dropFirst()), let number = Int(parts[2]) else { return nil }
        return (ordinal, number)
    }

    /// Where a user's message's send time is in `times`; nil for any other text.
    private func place(of text: String) -> (ordinal: Int, index: Int)? {
        guard let (ordinal, number) = Self.number(of: text), times.indices.contains(ordinal),
              times[ordinal].indices.contains(number - 1) else { return nil }
        return (ordinal, number - 1)
    }

    /// When a message still expected was sent; nil for any other text.
    func sentAt(_ text: String) -> Instant? {
        guard let (ordinal, index) = place(of: text), times[ordinal][index] != Self.gone else { return nil }
        return times[ordinal][index]
    }

    /// A copy of the message `text` reached `device`, its sender's (`own`) or a reader's.
    /// A message done with (acknowledged, every reader's copy in) leaves `open`.
    mutating func arrived(_ text: String, on device: Int, own: Bool) -> Arrival {
        // The record is changed where it is (found once): a copy taken out and put back
        // would hold a second reference to its set of readers, and removing one would copy
        // the set.
        guard let slot = open.index(forKey: text) else { return sentAt(text).map { .again(sentAt: $0) } ?? .unexpected }
        let record = (at: open.values[slot].at, group: open.values[slot].group)
        let arrival: Arrival
        if own {
            guard !open.values[slot].acked else { return .again(sentAt: record.at) }
            open.values[slot].acked = true
            arrival = .acknowledged(sentAt: record.at, group: record.group)
        } else if open.values[slot].pending.remove(device) != nil {
            arrival = .read(sentAt: record.at, group: record.group)
        } else {
            return .again(sentAt: record.at)
        }
        if open.values[slot].acked && open.values[slot].pending.isEmpty { open.remove(at: slot) }
        return arrival
    }

    /// The message is expected of nobody any more.
    mutating func forget(_ text: String) {
        open[text] = nil
        guard let (ordinal, index) = place(of: text) else { return }
        times[ordinal][index] = Self.gone
    }

    /// What the device with `ordinal` had not got out yet goes with it (logging out drops
    /// the outbox).
    mutating func dropUnacknowledged(from ordinal: Int) {
        let dropped = open.filter { !$0.value.acked && Self.number(of: $0.key)?.ordinal == ordinal }
        for text in dropped.keys { forget(text) }
    }

    /// `device` need read nothing open any more; only in `channel`, when one is given. (A
    /// message left with no reader stays open until it is acknowledged, or the run ends.)
    mutating func excuse(_ device: Int, in channel: String? = nil) {
        // Walked by index and changed in place: a loop over `open.keys` would hold the
        // table while changing it, and so copy it whole.
        var index = open.startIndex
        while index != open.endIndex {
            if channel.map({ open.values[index].channel == $0 }) ?? true { open.values[index].pending.remove(device) }
            open.formIndex(after: &index)
        }
    }

    /// How many messages still expected were sent before `cutoff` and are done with (no
    /// longer open): every check on them has passed.
    func settled(before cutoff: Instant) -> Int {
        var count = 0
        for sends in times { for at in sends where at != Self.gone && at < cutoff { count += 1 } }
        return count - open.values.count { $0.at < cutoff }
    }
}
