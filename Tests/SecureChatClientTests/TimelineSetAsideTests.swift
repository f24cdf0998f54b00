import Foundation
import LabKernel
import Testing
@testable import SecureChatClient

/// A snapshot that keeps every message in memory and one that keeps each channel's newest
/// two and sets the rest aside must hold the same timelines through the same deliveries,
/// late ones, edits, deletes and leaving channels.
@Suite("Chat client: timelines set aside into an archive")
struct TimelineSetAsideTests {
    /// An archive in a dictionary: the client's side of the contract, without SQLite.
    final class DictionaryArchive: TimelineArchive, @unchecked Sendable {
        struct Row { var message: ChatClientMessage; var channel: String; var former: Bool }
        var rows: [Int: [ChatID: Row]] = [:]

        func put(_ message: ChatClientMessage, in channel: String, former: Bool, owner: Int) {
            rows[owner, default: [:]][message.compactID] = Row(message: message, channel: channel, former: former)
        }

        func message(_ id: ChatID, in channel: String?, owner: Int) -> (message: ChatClientMessage, channel: String, former: Bool)? {
            guard let row = rows[owner]?[id], channel == nil || row.channel == channel else { return nil }
            return (row.message, row.channel, row.former)
        }

        func messages(in channel: String, former: Bool, owner: Int) -> [ChatClientMessage] {
            (rows[owner] ?? [:]).values.filter { $0.channel == channel && $0.former == former }.map(\.message)
        }

        func count(in channel: String, former: Bool, owner: Int) -> Int { messages(in: channel, former: former, owner: owner).count }

        func retire(_ channel: String, owner: Int) {
            for (id, row) in rows[owner] ?? [:] where row.channel == channel { rows[owner]![id]!.former = true }
        }

        func forget(owner: Int) { rows[owner] = nil }
    }

    static func message(_ n: Int, in channel: String, at ms: Int64) -> ChatClientMessage {
        ChatClientMessage(id: "00000000-0000-4000-8000-\(String(format: "%012d", n))", channelID: channel, senderID: "u\(n % 3)",
                          senderDeviceID: "d\(n % 3)", text: "m\(n)", createdAt: RFC3339.format(unixMilliseconds: ms), edited: false, deleted: false)
    }

    @Test("deliveries in and out of order, edits, deletes and channels left and rejoined give the same timelines, counts and lookups")
    func sameTimelines() {
        var plain = ChatClient.Snapshot(seed: StreamSeed(1))
        var setAside = ChatClient.Snapshot(seed: StreamSeed(1))
        let archive = DictionaryArchive()
        setAside.setAside(into: archive, owner: 7, keepingPerChannel: 2)
        var generator = SeededGenerator(seed: 5)
        let channels = ["a", "b", "c"]
        var delivered: [(ChatID, String)] = []
        for n in 0..<300 {
            let channel = channels[Int(generator.next(below: 3))]
            // Mostly in order; one in five arrives late, older than what is held.
            let ms = 1_000_000 + Int64(n) * 1_000 - (generator.next(below: 5) == 0 ? Int64(generator.next(below: 40_000)) : 0)
            let message = Self.message(n, in: channel, at: ms)
            plain.insert(message, in: channel)
            setAside.insert(message, in: channel)
            delivered.append((message.compactID, channel))
            switch generator.next(below: 12) {
            case 0, 1:  // an edit or a delete of any message delivered so far
                let (id, _) = delivered[Int(generator.next(below: UInt64(delivered.count)))]
                let delete = generator.next(below: 2) == 0
                let change = { (m: inout ChatClientMessage) -> Bool in
                    if delete { m.deleted = true } else { m.text += " (edited)"; m.edited = true }
                    return true
                }
                #expect(plain.update(id, change) == setAside.update(id, change))
            default: break
            }
            if n % 60 == 59 {  // the device leaves a channel; later messages start its timeline anew
                plain.retireTimeline(channel)
                setAside.retireTimeline(channel)
            }
        }
        for channel in channels {
            #expect(plain.timeline(channel) == setAside.timeline(channel), "\(channel)")
            #expect(plain.count(in: channel) == setAside.count(in: channel))
            #expect((setAside.timelines[channel]?.count ?? 0) <= 2, "only the newest two in memory")
        }
        #expect(plain.messageCount == setAside.messageCount && plain.messageCount == 300)
        for (id, channel) in delivered {
            #expect(plain.holds(id, in: channel) == setAside.holds(id, in: channel) && setAside.holds(id))
            #expect(plain.message(id) == setAside.message(id))
        }
        #expect(!setAside.holds(ChatID("00000000-0000-4000-8000-999999999999")))
        #expect(setAside.messagesSetAside > 250, "\(setAside.messagesSetAside) set aside")
    }
}
