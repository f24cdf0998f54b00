import ChatCrypto
import Foundation
import LabKernel
@testable import SecureChatClient
import Testing

/// The compact message record: what it reads back, how it orders, how a snapshot stores it.
@Suite("Chat client: compact messages")
struct ChatClientMessageTests {
    @Test("server ids and times are held compactly and read back as sent; other forms are kept as text")
    func roundTrip() {
        let uuid = "3f2b8c1e-9a4d-4e6f-8b7a-0c1d2e3f4a5b"
        #expect(ChatID(uuid) == .uuid(UUIDValue(uuid)!) && ChatID(uuid).text == uuid)
        for text in ["3F2B8C1E-9A4D-4E6F-8B7A-0C1D2E3F4A5B", "msg-17", "", "3f2b8c1e9a4d4e6f8b7a0c1d2e3f4a5b"] {
            #expect(ChatID(text) == .other(text) && ChatID(text).text == text, "\(text)")
        }
        let stamp = "2026-11-27T01:02:03.456Z"
        #expect(ChatTime(stamp) == .milliseconds(RFC3339.parse(stamp)!) && ChatTime(stamp).text == stamp)
        for text in ["2026-11-27T01:02:03Z", "2026-11-27T01:02:03.456789+00:00", "yesterday"] {
            #expect(ChatTime(text) == .other(text) && ChatTime(text).text == text, "\(text)")
        }
        let message = ChatClientMessage(id: uuid, channelID: "general", senderID: uuid, senderDeviceID: nil, text: "hi",
                                        createdAt: stamp, edited: false, deleted: false)
        #expect(message.id == uuid && message.channelID == "general" && message.senderDeviceID == nil && message.createdAt == stamp)
    }

    @Test("messages of one channel, sender and device share one record of where they came from, across a relaunch, and read back their own")
    func originsAreShared() {
        var client = ChatClient(snapshot: ChatClient.Snapshot(seed: StreamSeed(1)))
        var out: [ClientEffect] = []
        func deliver(_ n: Int, from device: String, in channel: String = "c") {
            let json: JSONValue = ["id": .string("m\(n)"), "channel_id": .string(channel), "sender_id": "u", "sender_device_id": .string(device),
                                   "created_at": .string(RFC3339.format(unixMilliseconds: 1_795_000_000_000 + Int64(n)))]
            client.deliver(json, text: "text \(n)", &out)
        }
        for (n, device) in ["d1", "d1", "d1", "d2"].enumerated() { deliver(n, from: device) }
        deliver(4, from: "d1", in: "other")
        // The app is killed and relaunched from its stored snapshot: what arrives next shares
        // the records the stored messages hold.
        client = ChatClient(snapshot: client.snapshot)
        deliver(5, from: "d1")
        let line = client.timeline("c")
        #expect(line.map(\.text) == ["text 0", "text 1", "text 2", "text 3", "text 5"])
        #expect(line[0].origin === line[1].origin && line[1].origin === line[2].origin && line[4].origin === line[0].origin)
        #expect(line[3].origin !== line[0].origin && line[3].senderDeviceID == "d2" && line[0].senderDeviceID == "d1")
        #expect(line.allSatisfy { $0.channelID == "c" && $0.senderID == "u" })
        #expect(client.timeline("other").map(\.channelID) == ["other"] && client.timeline("other")[0].origin !== line[0].origin)
    }

    @Test("ids and times order as their texts do, compact or not")
    func order() {
        var generator = StreamSeed(4).generator()
        let texts = (0..<200).map { n in n % 5 == 0 ? "id-\(n)" : UUIDText.random(using: &generator) }
        #expect(texts.map { ChatID($0) }.sorted().map(\.text) == texts.sorted())
        let times = (0..<200).map { n in n % 7 == 0 ? "2026-11-27T0\(n % 10):00:00Z" : RFC3339.format(unixMilliseconds: 1_795_000_000_000 + Int64(n * 7919 % 5000)) }
        #expect(times.map(ChatTime.init).sorted().map(\.text) == times.sorted())
    }

    @Test("a snapshot's timelines are stored as messages with text ids and times, and read back equal")
    func snapshotFormat() throws {
        var snapshot = ChatClient.Snapshot(seed: StreamSeed(1))
        let id = "0a1b2c3d-4e5f-4a6b-8c7d-8e9fa0b1c2d3"
        snapshot.timelines["c"] = [ChatClientMessage(id: id, channelID: "c", senderID: "u", senderDeviceID: "d", text: "hello",
                                                     createdAt: "2026-11-27T01:02:03.456Z", edited: true, deleted: false)]
        let data = try JSONEncoder().encode(snapshot)
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let line = try #require((object["timelines"] as? [String: [[String: Any]]])?["c"])
        #expect(line.count == 1 && line[0]["createdAt"] as? String == "2026-11-27T01:02:03.456Z" && line[0]["id"] as? String == id)
        let back = try JSONDecoder().decode(ChatClient.Snapshot.self, from: data)
        #expect(back.timelines == snapshot.timelines && back.messageCount == 1)
    }

    @Test("member lists, device sets and ids seen without a timeline are stored as the server's texts, and read back equal")
    func idsStoredAsTexts() throws {
        var snapshot = ChatClient.Snapshot(seed: StreamSeed(1))
        let user = "0a1b2c3d-4e5f-4a6b-8c7d-8e9fa0b1c2d3", device = "1a1b2c3d-4e5f-4a6b-8c7d-8e9fa0b1c2d3", odd = "Not-A-UUID"
        snapshot.channels["c"] = ChatClient.ChannelInfo(id: "c", isDM: false, members: [ChatID(user), ChatID(odd)])
        snapshot.deviceSets[user] = ChatClient.DeviceSet(version: 3, devices: [ChatID(device), ChatID(odd)])
        snapshot.seenWithoutTimeline = [ChatID(device)]
        let data = try JSONEncoder().encode(snapshot)
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        #expect(((object["channels"] as? [String: [String: Any]])?["c"]?["members"] as? [String]) == [user, odd])
        #expect(((object["deviceSets"] as? [String: [String: Any]])?[user]?["devices"] as? [String]) == [device, odd])
        #expect(object["seenWithoutTimeline"] as? [String] == [device])
        let back = try JSONDecoder().decode(ChatClient.Snapshot.self, from: data)
        #expect(back.channels == snapshot.channels && back.deviceSets == snapshot.deviceSets && back.seenWithoutTimeline == snapshot.seenWithoutTimeline)
    }

    @Test("the key store's sessions, chains and receivers are stored under the ids' texts, and a restored session still talks")
    func keyStoreIdsStoredAsTexts() throws {
        var generator = StreamSeed(3).generator()
        var alice = try ChatKeyStore(generator: &generator), bob = try ChatKeyStore(generator: &generator)
        let channel: ChatID = "2a1b2c3d-4e5f-4a6b-8c7d-8e9fa0b1c2d3", bobDevice: ChatID = "1a1b2c3d-4e5f-4a6b-8c7d-8e9fa0b1c2d3"
        let aliceDevice: ChatID = "0a1b2c3d-4e5f-4a6b-8c7d-8e9fa0b1c2d3", odd: ChatID = "Not-A-UUID"
        let bundle = PreKeyBundle(identity: bob.identity, signedPreKey: bob.signedPreKey, oneTimePreKey: nil)
        let first = try alice.encrypt(Array("one".utf8), for: bobDevice, bundle: bundle, generator: &generator)
        #expect(try bob.decrypt(first, from: aliceDevice) == Array("one".utf8))
        let chain = try SenderKeyChain(channelID: channel.text, chainKey: generator.bytes(32), signingSeed: generator.bytes(32))
        alice.senderChains[channel] = chain
        alice.distributedTo[channel] = [bobDevice, odd]
        let owner = SenderKeyOwner(channel: channel, device: odd)
        alice.receivers[owner] = [SenderKeyReceiver(channelID: channel.text, distribution: chain.distribution)]

        let data = try JSONEncoder().encode(alice)
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        #expect((object["sessions"] as? [String: Any])?.keys.sorted() == [bobDevice.text])
        #expect((object["senderChains"] as? [String: Any])?.keys.sorted() == [channel.text])
        #expect((object["distributedTo"] as? [String: [String]])?[channel.text]?.sorted() == [bobDevice.text, odd.text].sorted())
        #expect((object["receivers"] as? [String: Any])?.keys.sorted() == ["\(channel.text)|Not-A-UUID"])

        var back = try JSONDecoder().decode(ChatKeyStore.self, from: data)
        #expect(back.distributedTo == alice.distributedTo && Array(back.receivers.keys) == [owner] && Array(back.senderChains.keys) == [channel])
        let second = try back.encrypt(Array("two".utf8), for: bobDevice, bundle: nil, generator: &generator)
        #expect(try bob.decrypt(second, from: aliceDevice) == Array("two".utf8), "the restored session is the one Bob holds")
        #expect("\(bobDevice) \(owner)" == "\(bobDevice.text) \(channel.text)|Not-A-UUID", "ids read as their texts in messages")
        #expect(SenderKeyOwner("no-bar") == nil && SenderKeyOwner("a|b|c") == SenderKeyOwner(channel: "a", device: "b|c"))
    }

    @Test("timelines keep delivery in created_at order, find messages by id, and a left channel's messages stay delivered")
    func timelines() {
        var snapshot = ChatClient.Snapshot(seed: StreamSeed(2))
        func message(_ n: Int, at ms: Int64, in channel: String = "c") -> ChatClientMessage {
            ChatClientMessage(id: "m\(n)", channelID: channel, senderID: "u", senderDeviceID: "d", text: "text \(n)",
                              createdAt: RFC3339.format(unixMilliseconds: 1_795_000_000_000 + ms), edited: false, deleted: false)
        }
        // Out of order, and two at one instant (then by id).
        for (n, ms) in [(1, 10), (3, 30), (2, 20), (5, 40), (4, 40), (0, 0)] { snapshot.insert(message(n, at: Int64(ms)), in: "c") }
        snapshot.insert(message(9, at: 5, in: "g"), in: "g")
        #expect(snapshot.timelines["c"]?.map(\.id) == ["m0", "m1", "m2", "m3", "m4", "m5"] && snapshot.messageCount == 7)
        #expect(snapshot.holds(ChatID("m3"), in: "c") && !snapshot.holds(ChatID("m3"), in: "g") && snapshot.holds(ChatID("m9")))
        #expect(snapshot.message(ChatID("m9"))?.text == "text 9" && snapshot.message(ChatID("m7")) == nil)
        let edited = snapshot.update(ChatID("m2")) { stored in
            stored.text = "changed"
            return true
        }
        #expect(edited?.text == "changed" && snapshot.timelines["c"]?[2].text == "changed")
        #expect(snapshot.update(ChatID("m2")) { _ in false } == nil && snapshot.update(ChatID("m7")) { _ in true } == nil)
        snapshot.retireTimeline("c")
        #expect(snapshot.timelines["c"] == nil && snapshot.messageCount == 7)
        #expect(snapshot.holds(ChatID("m4"), in: "c") && snapshot.message(ChatID("m4"))?.text == "text 4")
        snapshot.insert(message(6, at: 50), in: "c")
        #expect(snapshot.timelines["c"]?.map(\.id) == ["m6"] && snapshot.holds(ChatID("m0"), in: "c") && snapshot.messageCount == 8)
    }
}
