import Testing
import ChatCrypto
import LabCrypto
import LabKernel
@testable import SecureChatServer

@Suite("Chat server: channels, keys, messages, events")
struct ChannelMessageTests {
    /// Base64 of a syntactically valid sender-key wire.
    static let groupCiphertext = Base64.encode([0x03] + [UInt8](repeating: 7, count: 100))
    static func envelope(to devices: [String], from: String) -> String {
        ChatEnvelope.encode(from: from, to: Dictionary(uniqueKeysWithValues: devices.map { ($0, ChatEnvelope.Item(wire: [0x02] + [UInt8](repeating: 1, count: 80), prekey: nil)) }))
    }

    @Test("a page of messages written member by member is byte for byte the canonical JSON of each message: plain, edited, a reply, with and without optional fields")
    func renderedMessagesAreCanonical() {
        var h = ChatHarness()
        let base = ChatMessage(id: "0b8e4c52-6f1e-4a34-9f44-3d2c1b0a9e8f", channelID: "c1", senderID: "u1", senderDeviceID: "d\"1\\",
                               content: "x\ny", contentType: "text", protocolVersion: 2, replyToID: nil, clientMessageID: nil,
                               editedAt: nil, createdAt: .zero + .seconds(90))
        var edited = base
        edited.id = "m2"
        edited.editedAt = .zero + .seconds(100)
        edited.clientMessageID = "client-7"
        var reply = base
        reply.id = "m3"
        reply.senderDeviceID = nil
        reply.replyToID = base.id
        h.server.state.messages[base.id] = base
        for message in [base, edited, reply] {
            var canonical: [UInt8] = []
            h.server.messageJSON(message).write(to: &canonical)
            #expect(h.server.renderMessage(message) == canonical, "\(message.id)")
        }
    }

    @Test("two devices of one user both receive channel.new for a DM; the DM is found again, not duplicated")
    func channelNewOnEveryDevice() {
        var h = ChatHarness()
        let alice = h.register("alice"), bob = h.register("bob")
        let (_, bob2) = h.login("bob")
        let sockets = [h.socket(bob)!, h.socket(bob2!)!, h.socket(alice)!]
        let dm = h.send("POST", "/channels/dm", ["user_id": .string(bob.userID)], token: alice.access)
        #expect(dm.status == 201 && dm.jsonBody?["encryption_type"] == "x3dh" && dm.jsonBody?["is_dm"] == true)
        for socket in sockets { #expect(h.events(socket, "channel.new").count == 1) }
        let again = h.send("POST", "/channels/dm", ["user_id": .string(alice.userID)], token: bob.access)
        #expect(again.status == 200 && again.jsonBody?["id"] == dm.jsonBody?["id"])
        #expect(h.events(sockets[0], "channel.new").count == 1)
    }

    @Test("members only: a stranger cannot read, post, set up keys or see members of a channel (403), an unknown one is 404")
    func membership() {
        var h = ChatHarness()
        let alice = h.register("alice"), eve = h.register("eve")
        let id = h.send("POST", "/channels", ["name": "team"], token: alice.access).jsonBody?["id"]?.stringValue ?? ""
        let before = h.fingerprint
        for (method, path, body) in [("GET", "/channels/\(id)/messages", JSONValue?.none), ("POST", "/channels/\(id)/messages", ["content": "hi"]),
                                     ("GET", "/keys/channels/\(id)/x3dh-setup", nil), ("GET", "/keys/channels/\(id)/sender-keys", nil),
                                     ("POST", "/keys/channels/\(id)/sender-keys", ["device_id": .string(eve.deviceID), "sender_key_public": .string(Base64.encode([UInt8](repeating: 1, count: 32)))]),
                                     ("GET", "/channels/\(id)/members", nil), ("GET", "/channels/\(id)", nil)] as [(String, String, JSONValue?)] {
            let r = h.send(method, path, body, token: eve.access)
            #expect(r.status == 403 && r.detail == "Not a member of this channel", "\(method) \(path)")
        }
        #expect(h.send("GET", "/channels/\(UUIDText.random(using: &h.server.generator))/messages", token: eve.access).status == 404)
        #expect(h.send("GET", "/channels/not-a-uuid/messages", token: eve.access).status == 422)
        #expect(h.fingerprint == before)
        #expect(h.send("POST", "/channels/\(id)/join", token: eve.access).status == 403, "a private group needs an invitation")
        #expect(h.send("GET", "/channels/\(id)/messages", token: eve.access).status == 403)
        #expect(h.fingerprint == before)
        #expect(h.send("POST", "/channels/\(id)/members", ["user_id": .string(eve.userID)], token: alice.access).status == 201)
        #expect(h.send("GET", "/channels/\(id)/messages", token: eve.access).status == 200)
        #expect(h.send("POST", "/channels/\(id)/members", ["user_id": .string(eve.userID)], token: alice.access).status == 409)
    }

    @Test("bundles hand out each one-time key once and warn the owner below 10; uploads need a valid signature")
    func bundles() throws {
        var h = ChatHarness { $0.bundleFetchesPerTargetPerMinute = 100 }
        let alice = h.register("alice"), bob = h.register("bob")
        let socket = h.socket(bob)!
        let identity = try IdentityKey(seed: SHA256.hash("bob id"))
        let spk = try PreKey(id: 1, seed: SHA256.hash("bob spk"))
        let keys = try (0..<11).map { try PreKey(id: UInt32($0), seed: SHA256.hash("otk \($0)")) }
        let good = PreKeyBundle(identity: identity, signedPreKey: spk, oneTimePreKey: nil)
        var upload: [String: JSONValue] = ["device_id": .string(bob.deviceID), "identity_key": .string(Base64.encode(identity.publicKey)),
                                           "signed_pre_key": .string(Base64.encode(spk.publicKey)),
                                           "signed_pre_key_signature": .string(Base64.encode(Array(good.signedPreKeySignature.reversed()))),
                                           "one_time_pre_keys": .array(keys.map { .string(Base64.encode($0.publicKey)) })]
        let forged = h.send("POST", "/keys/upload", .object(upload), token: bob.access)
        #expect(forged.status == 422 && forged.detailLoc == ["body", "signed_pre_key_signature"])
        upload["signed_pre_key_signature"] = .string(Base64.encode(good.signedPreKeySignature))
        #expect(h.send("POST", "/keys/upload", .object(upload), token: bob.access).status == 201)
        var handed: Set<String> = []
        for n in 0..<12 {
            let b = h.send("GET", "/keys/\(bob.userID)/bundles", token: alice.access).jsonBody?.arrayValue?.first
            #expect(b?["one_time_pre_key_count"]?.numberValue == Double(max(0, 11 - n)))
            if let k = b?["one_time_pre_key"]?.stringValue { #expect(handed.insert(k).inserted) }
        }
        #expect(handed.count == 11)
        let warnings = h.events(socket, "keys.low_otp")
        #expect(warnings.first?["remaining"] == 9 && warnings.first?["device_id"] == .string(bob.deviceID))
        let more = h.send("POST", "/keys/one-time", ["device_id": .string(bob.deviceID), "one_time_pre_keys": [.string(Base64.encode(keys[0].publicKey))]],
                          token: bob.access)
        #expect(more.status == 201 && more.jsonBody?["count"] == 1)
        #expect(h.send("POST", "/keys/one-time", ["device_id": .string(alice.deviceID), "one_time_pre_keys": []], token: bob.access).status == 404)
    }

    @Test("v2 content must be ciphertext: plaintext is refused in DMs and groups; chain keys never reach the server")
    func ciphertextOnly() throws {
        var h = ChatHarness()
        let alice = h.register("alice"), bob = h.register("bob")
        try h.uploadKeys(bob, "bob")
        let group = h.send("POST", "/channels", ["name": "g"], token: alice.access).jsonBody?["id"]?.stringValue ?? ""
        let dm = h.send("POST", "/channels/dm", ["user_id": .string(bob.userID)], token: alice.access).jsonBody?["id"]?.stringValue ?? ""
        let before = h.fingerprint
        for (channel, content) in [(group, "hello in the clear"), (dm, "hello in the clear"), (group, Self.envelope(to: [bob.deviceID], from: alice.deviceID)),
                                   (dm, Self.groupCiphertext)] {
            let r = h.send("POST", "/channels/\(channel)/messages", ["content": .string(content), "protocol_version": 2], token: alice.access)
            #expect(r.status == 422 && r.detailLoc == ["body", "content"])
        }
        #expect(h.fingerprint == before)
        #expect(h.send("POST", "/channels/\(group)/messages", ["content": .string(Self.groupCiphertext), "protocol_version": 2], token: alice.access).status == 201)
        #expect(h.send("POST", "/channels/\(dm)/messages", ["content": .string(Self.envelope(to: [bob.deviceID], from: alice.deviceID)),
                                                          "protocol_version": 2], token: alice.access).status == 201)
        let chain = h.send("POST", "/keys/channels/\(group)/sender-keys", ["device_id": .string(alice.deviceID),
                                                                           "sender_key_public": .string(Base64.encode([UInt8](repeating: 3, count: 32))),
                                                                           "chain_key": "c2VjcmV0"], token: alice.access)
        #expect(chain.status == 422 && chain.detailLoc == ["body", "chain_key"])
    }

    @Test("a retried send with the same client_message_id returns the first message and announces nothing new")
    func idempotentSend() {
        var h = ChatHarness()
        let alice = h.register("alice")
        let socket = h.socket(alice)!
        let channel = h.legacyGroup(alice)
        h.frame(socket, #"{"type":"subscribe","channel_id":"\#(channel)"}"#)
        let body: JSONValue = ["content": "once", "client_message_id": "c-1"]
        let first = h.send("POST", "/channels/\(channel)/messages", body, token: alice.access)
        let retry = h.send("POST", "/channels/\(channel)/messages", body, token: alice.access)
        #expect(first.status == 201 && retry.status == 200 && first.jsonBody?["id"] == retry.jsonBody?["id"])
        #expect(h.events(socket, "message.new").count == 1)
        #expect(h.send("GET", "/channels/\(channel)/messages", token: alice.access).jsonBody?["messages"]?.arrayValue?.count == 1)
    }

    @Test("paging back with before/limit sees every message exactly once while new ones keep arriving in the same millisecond")
    func pagination() {
        var h = ChatHarness()
        let alice = h.register("alice")
        let channel = h.legacyGroup(alice, "busy")
        for n in 0..<230 { h.send("POST", "/channels/\(channel)/messages", ["content": .string("m\(n)")], token: alice.access) }
        var seen: [String] = []
        var before: String?
        var pages = 0
        while true {
            let target = "/channels/\(channel)/messages?limit=50" + (before.map { "&before=\(PercentEncoding.encode($0))" } ?? "")
            let page = h.send("GET", target, token: alice.access).jsonBody
            let messages = page?["messages"]?.arrayValue ?? []
            seen = messages.compactMap { $0["content"]?.stringValue } + seen
            before = messages.first?["created_at"]?.stringValue
            pages += 1
            // Newer messages arrive between pages, at the very same instant.
            for n in 0..<20 { h.send("POST", "/channels/\(channel)/messages", ["content": .string("late\(pages)-\(n)")], token: alice.access) }
            if page?["has_more"] != true { break }
        }
        #expect(seen == (0..<230).map { "m\($0)" })
        #expect(pages == 5)
        #expect(h.send("GET", "/channels/\(channel)/messages?limit=500", token: alice.access).status == 422)
        #expect(h.send("GET", "/channels/\(channel)/messages?before=yesterday", token: alice.access).detailType == "datetime_parsing")
    }

    @Test("edit and delete: own messages only, announced to the channel; typing reaches the others")
    func editDeleteTyping() {
        var h = ChatHarness()
        let alice = h.register("alice"), bob = h.register("bob")
        let channel = h.legacyGroup(alice, visibility: "public")
        h.send("POST", "/channels/\(channel)/join", token: bob.access)
        let (sa, sb) = (h.socket(alice)!, h.socket(bob)!)
        let id = h.send("POST", "/channels/\(channel)/messages", ["content": "frist"], token: alice.access).jsonBody?["id"]?.stringValue ?? ""
        #expect(h.send("PATCH", "/channels/messages/\(id)", ["content": "first"], token: bob.access).status == 403)
        #expect(h.send("PATCH", "/channels/messages/\(id)", ["content": "first"], token: alice.access).jsonBody?["edited_at"]?.stringValue != nil)
        #expect(h.events(sb, "message.edit").first?["message"]?["content"] == "first")
        #expect(h.send("DELETE", "/channels/messages/\(id)", token: bob.access).status == 403)
        #expect(h.send("DELETE", "/channels/messages/\(id)", token: alice.access).status == 204)
        #expect(h.events(sb, "message.delete").first?["message_id"] == .string(id))
        #expect(h.send("GET", "/channels/\(channel)/messages", token: bob.access).jsonBody?["messages"]?.arrayValue?.isEmpty == true)
        h.frame(sa, #"{"type":"typing.start","channel_id":"\#(channel)"}"#)
        #expect(h.events(sb, "typing.start").first?["user_id"] == .string(alice.userID))
        #expect(h.events(sa, "typing.start").isEmpty, "not echoed to the typist")
        h.frame(sa, "not json")
        #expect(h.frames[sa]?.last == ["error": "Invalid JSON"])
    }

    @Test("bad input: malformed JSON, wrong types, oversized content, unknown fields' types each get a precise 422 and change nothing")
    func badInput() {
        var h = ChatHarness { $0.maxContentBytes = 100 }
        let alice = h.register("alice")
        let channel = h.legacyGroup(alice)
        let before = h.fingerprint
        let cases: [(HTTPResponseMessage, String, [String])] = [
            (h.send("POST", "/channels/\(channel)/messages", token: alice.access, raw: "{\"content\": "), "json_invalid", ["body"]),
            (h.send("POST", "/channels/\(channel)/messages", token: alice.access, raw: "[1,2]"), "dict_type", ["body"]),
            (h.send("POST", "/channels/\(channel)/messages", ["content": 5], token: alice.access), "type_error", ["body", "content"]),
            (h.send("POST", "/channels/\(channel)/messages", ["content": .string(String(repeating: "x", count: 101))], token: alice.access),
             "string_too_long", ["body", "content"]),
            (h.send("POST", "/channels/\(channel)/messages", ["content": "x", "protocol_version": 3], token: alice.access), "literal_error",
             ["body", "protocol_version"]),
            (h.send("POST", "/channels/\(channel)/messages", ["content": "x", "reply_to_id": "zzz"], token: alice.access), "uuid_parsing",
             ["body", "reply_to_id"]),
            (h.send("POST", "/auth/register", ["username": "a b", "password": "long enough"]), "string_pattern_mismatch", ["body", "username"]),
            (h.send("POST", "/auth/register", ["username": "carol"]), "missing", ["body", "password"]),
        ]
        for (response, type, loc) in cases {
            #expect(response.status == 422 && response.detailType == type && response.detailLoc == loc, "\(response.detail)")
        }
        #expect(h.fingerprint == before)
    }
}

@Suite("Chat server: a DM reaches every current device")
struct DeviceCoverageTests {
    @Test("a DM envelope missing a member's device, or addressing a removed one, is 409 with the difference; the exact set is 201")
    func mismatchedDevices() throws {
        var h = ChatHarness()
        let alice = h.register("alice"), bob = h.register("bob")
        let (_, tablet) = h.login("bob", device: "tablet")
        for (account, label) in [(alice, "alice"), (bob, "bob"), (tablet!, "tablet")] { try h.uploadKeys(account, label) }
        let dm = h.send("POST", "/channels/dm", ["user_id": .string(bob.userID)], token: alice.access).jsonBody?["id"]?.stringValue ?? ""
        func post(_ devices: [String]) -> HTTPResponseMessage {
            h.send("POST", "/channels/\(dm)/messages", ["content": .string(ChannelMessageTests.envelope(to: devices, from: alice.deviceID)),
                                                       "protocol_version": 2], token: alice.access)
        }
        let before = h.fingerprint
        let missing = post([bob.deviceID])
        #expect(missing.status == 409 && missing.jsonBody?["detail"]?["missing_devices"] == [.string(tablet!.deviceID)])
        #expect(h.fingerprint == before)
        #expect(post([bob.deviceID, tablet!.deviceID]).status == 201)
        h.send("DELETE", "/devices/\(tablet!.deviceID)", token: bob.access)
        let extra = post([bob.deviceID, tablet!.deviceID])
        #expect(extra.status == 409 && extra.jsonBody?["detail"]?["extra_devices"] == [.string(tablet!.deviceID)])
        #expect(post([bob.deviceID]).status == 201)
    }
}
