import Testing
import LabKernel
@testable import Simulator

/// The chat run's record of what users sent: a message leaves the open records once it is
/// acknowledged and read by all, and its send time stays for the checks that need it.
@Suite("Sent messages")
struct SentMessagesTests {
    static let minute = Instant.zero + .minutes(1)

    @Test("a message is open until its sender's acknowledgement and every reader's copy are in; then only its send time stays")
    func closesWhenDone() {
        var sent = SentMessages()
        let text = sent.send(user: 3, ordinal: 7, at: Self.minute, group: true, channel: "c", readers: [10, 11])
        #expect(text == "u3.d7.1")
        #expect(sent.arrived(text, on: 10, own: false) == .read(sentAt: Self.minute, group: true))
        #expect(sent.arrived(text, on: 10, own: false) == .again(sentAt: Self.minute), "a second copy is not news")
        #expect(sent.arrived(text, on: 12, own: false) == .again(sentAt: Self.minute), "nor one for a device not among its readers")
        #expect(sent.arrived(text, on: 7, own: true) == .acknowledged(sentAt: Self.minute, group: true))
        #expect(sent.open[text] != nil, "reader 11 has not read it")
        #expect(sent.arrived(text, on: 11, own: false) == .read(sentAt: Self.minute, group: true))
        #expect(sent.open.isEmpty)
        #expect(sent.sentAt(text) == Self.minute)
        #expect(sent.arrived(text, on: 7, own: true) == .again(sentAt: Self.minute), "a repeated acknowledgement is not news")
        #expect(sent.sentAt("u3.d7.2") == nil && sent.sentAt("hello") == nil && sent.arrived("u3.d8.1", on: 1, own: false) == .unexpected)
    }

    @Test("a deleted message, and what a retired device had not got out, are expected of nobody; excused readers are no longer waited for")
    func forgetsAndExcuses() {
        var sent = SentMessages()
        let deleted = sent.send(user: 0, ordinal: 0, at: Self.minute, group: false, channel: "dm", readers: [1])
        let unacked = sent.send(user: 0, ordinal: 0, at: Self.minute + .seconds(1), group: false, channel: "dm", readers: [1])
        let other = sent.send(user: 1, ordinal: 1, at: Self.minute + .seconds(2), group: true, channel: "g", readers: [0, 2])
        #expect(deleted == "u0.d0.1" && unacked == "u0.d0.2" && other == "u1.d1.1")
        sent.forget(deleted)
        #expect(sent.sentAt(deleted) == nil && sent.arrived(deleted, on: 1, own: false) == .unexpected)
        sent.dropUnacknowledged(from: 0)
        #expect(sent.sentAt(unacked) == nil && sent.open.keys.sorted() == [other])
        sent.excuse(2, in: "dm")
        #expect(sent.open[other]?.pending == [0, 2], "excused only in another channel")
        sent.excuse(2)
        _ = sent.arrived(other, on: 1, own: true)
        #expect(sent.arrived(other, on: 0, own: false) == .read(sentAt: Self.minute + .seconds(2), group: true))
        #expect(sent.open.isEmpty)
    }

    @Test("what is done with counts as checked: messages still expected, sent before the cutoff, not open")
    func countsSettled() {
        var sent = SentMessages()
        var texts: [String] = []
        for n in 0..<6 { texts.append(sent.send(user: 0, ordinal: n % 2, at: Self.minute + .seconds(Int64(n)), group: true, channel: "g", readers: [9])) }
        for text in texts.prefix(4) {
            _ = sent.arrived(text, on: 9, own: false)
            _ = sent.arrived(text, on: 0, own: true)
        }
        sent.forget(texts[0])
        // Done: texts 1, 2, 3 (0 is deleted); 4 and 5 are open. Cutoff after text 2's send.
        #expect(sent.settled(before: Self.minute + .seconds(3)) == 2)
        #expect(sent.settled(before: Self.minute + .seconds(10)) == 3)
    }
}
