import Testing
import ChatCrypto
import LabCrypto
import LabKernel
import LabTestSupport
@testable import SecureChatServer

/// Hostile requests and frames at every route of the chat server core, from one seed.
/// Every answer must be a 2xx or 4xx; a trap ends the test process (and fails the run).
/// `FLEETLAB_FUZZ_REQUESTS=200000 swift test --filter ChatServerFuzzTests` runs it longer.
@Suite("Chat server: fuzzed requests and frames")
struct ChatServerFuzzTests {
    static let routes: [RequestFuzzer.Route] = [
        .init("POST", "/api/v1/auth/register", ["username": "newuser", "password": "long enough pass", "email": "a@b.c",
                                                "display_name": "N", "device_name": "phone"]),
        .init("POST", "/api/v1/auth/login", ["username": "alice", "password": "correct horse", "device_name": "tablet"]),
        .init("POST", "/api/v1/auth/refresh", ["refresh_token": "rt_x"]),
        .init("POST", "/api/v1/auth/logout", ["refresh_token": "rt_x"]),
        .init("POST", "/api/v1/auth/logout-all"),
        .init("POST", "/api/v1/auth/ws-ticket"),
        .init("GET", "/api/v1/users/me"),
        .init("GET", "/api/v1/users/by-username/{username}"),
        .init("POST", "/api/v1/devices", ["device_name": "watch", "device_key_public": .string(Base64.encode([UInt8](repeating: 9, count: 32)))]),
        .init("GET", "/api/v1/devices"),
        .init("DELETE", "/api/v1/devices/{device}"),
        .init("GET", "/api/v1/users/{user}/devices"),
        .init("POST", "/api/v1/keys/upload", ["device_id": "{device}", "identity_key": "AAAA", "signed_pre_key": "AAAA",
                                             "signed_pre_key_signature": "AAAA", "one_time_pre_keys": ["AAAA"]]),
        .init("POST", "/api/v1/keys/one-time", ["device_id": "{device}", "one_time_pre_keys": [.string(Base64.encode([UInt8](repeating: 1, count: 32)))]]),
        .init("GET", "/api/v1/keys/{user}/bundles"),
        .init("GET", "/api/v1/keys/{device}/bundle"),
        .init("GET", "/api/v1/keys/channels/{channel}/x3dh-setup"),
        .init("POST", "/api/v1/keys/channels/{channel}/x3dh-setup", ["initiator_identity_key": .string(Base64.encode([UInt8](repeating: 2, count: 32))),
                                                                    "ephemeral_public_key": .string(Base64.encode([UInt8](repeating: 3, count: 32))),
                                                                    "used_one_time_key": false]),
        .init("GET", "/api/v1/keys/channels/{channel}/sender-keys"),
        .init("POST", "/api/v1/keys/channels/{channel}/sender-keys", ["device_id": "{device}", "sender_key_public": .string(Base64.encode([UInt8](repeating: 4, count: 32)))]),
        .init("POST", "/api/v1/channels", ["name": "team", "is_dm": false, "encryption_type": "sender_keys", "visibility": "private", "protocol": "legacy"]),
        .init("GET", "/api/v1/channels"),
        .init("POST", "/api/v1/channels/dm", ["user_id": "{user}"]),
        .init("GET", "/api/v1/channels/{channel}"),
        .init("PATCH", "/api/v1/channels/{channel}", ["name": "renamed"]),
        .init("DELETE", "/api/v1/channels/{channel}"),
        .init("POST", "/api/v1/channels/{channel}/join"),
        .init("POST", "/api/v1/channels/{channel}/leave"),
        .init("POST", "/api/v1/channels/{channel}/invites", ["user_id": "{user}"]),
        .init("GET", "/api/v1/channels/{channel}/members"),
        .init("POST", "/api/v1/channels/{channel}/members", ["user_id": "{user}"]),
        .init("DELETE", "/api/v1/channels/{channel}/members/{user}"),
        .init("GET", "/api/v1/channels/{channel}/messages", query: ["before", "limit"]),
        .init("POST", "/api/v1/channels/{channel}/messages", ["content": "hello", "content_type": "text", "protocol_version": 1,
                                                            "sender_device_id": "{device}", "reply_to_id": "{message}", "client_message_id": "c-1"]),
        .init("PATCH", "/api/v1/channels/messages/{message}", ["content": "edited"]),
        .init("DELETE", "/api/v1/channels/messages/{message}"),
        .init("GET", "/api/v1/admin/stats"),
        .init("GET", "/api/v1/admin/settings"),
        .init("PATCH", "/api/v1/admin/settings", ["registration_open": true, "max_message_bytes": 1000]),
        .init("GET", "/api/v1/admin/audit-log", query: ["actor", "action", "since", "until", "limit", "offset"]),
        .init("GET", "/api/v1/admin/users", query: ["q", "limit", "offset"]),
        .init("GET", "/api/v1/admin/channels", query: ["q", "limit", "offset"]),
        .init("DELETE", "/api/v1/admin/channels/{channel}"),
        .init("POST", "/api/v1/admin/users/{user}/ban"),
        .init("POST", "/api/v1/admin/users/{user}/suspend", ["minutes": 30]),
        .init("POST", "/api/v1/admin/users/{user}/unban"),
        .init("GET", "/.well-known/d3chat-server"),
    ]

    /// A server with an admin, two users with uploaded keys, a group, a DM and messages.
    struct Fixture {
        var h = ChatHarness()
        var tokens: [String] = []
        var sockets: [Int] = []

        init(fuzzer: inout RequestFuzzer) throws {
            let admin = h.register("admin"), alice = h.register("alice"), bob = h.register("bob")
            for (account, label) in [(alice, "alice"), (bob, "bob")] { try h.uploadKeys(account, label, oneTime: 12) }
            let group = h.send("POST", "/channels", ["name": "team"], token: alice.access).jsonBody?["id"]?.stringValue ?? ""
            h.send("POST", "/channels/\(group)/members", ["user_id": .string(bob.userID)], token: alice.access)
            let dm = h.send("POST", "/channels/dm", ["user_id": .string(bob.userID)], token: alice.access).jsonBody?["id"]?.stringValue ?? ""
            var messages: [String] = []
            for n in 0..<5 {
                let content = Base64.encode([0x03] + SHA256.hash("m\(n)") + SHA256.hash("m\(n)") + [UInt8](repeating: 0, count: 64))
                if let id = h.send("POST", "/channels/\(group)/messages", ["content": .string(content), "protocol_version": 2],
                                   token: alice.access).jsonBody?["id"]?.stringValue { messages.append(id) }
            }
            fuzzer.holes = ["channel": [group, dm], "user": [admin.userID, alice.userID, bob.userID], "device": [alice.deviceID, bob.deviceID],
                            "message": messages, "username": ["alice", "bob", "admin"], "before": ["9999-01-01T00:00:00Z", "0001-01-01T00:00:00Z"]]
            tokens = [admin.access, alice.access, bob.access]
            sockets = [alice, bob].compactMap { h.socket($0) }
        }
    }

    @Test("every field of every route's body, set to every edge value, is answered 2xx or 4xx", .timeLimit(.minutes(5)))
    func sweep() throws {
        var fuzzer = RequestFuzzer(defaultSeed: 0xC4A7)
        var fixture: Fixture?
        let outcome = try fuzzer.sweep(Self.routes) { fuzzer in
            fixture = try Fixture(fuzzer: &fuzzer)
            return ["authorization": "Bearer \(fixture!.tokens[1])"]
        } send: { request in
            fixture!.h.now = fixture!.h.now + .milliseconds(10)
            let reply = fixture!.h.server.handle(request, now: fixture!.h.now)
            fixture!.h.apply(reply.outputs)
            return reply.response
        }
        #expect(outcome.failures.isEmpty, "\(outcome.failures.prefix(5))")
        #expect(outcome.sent > 3_000)
    }

    @Test("every answer to a hostile request is a 2xx or 4xx", .timeLimit(.minutes(5)))
    func requests() throws {
        var fuzzer = RequestFuzzer(defaultSeed: 0xC4A7)
        var fixture: Fixture?
        let outcome = try fuzzer.random(Self.routes, count: RequestFuzzer.count(default: 10_000), resetEvery: 50) { fuzzer in
            // Requests revoke tokens, ban users and delete channels: start over now and then.
            fixture = try Fixture(fuzzer: &fuzzer)
        } headers: { fuzzer in
            let token = fuzzer.percent(95) ? fixture!.tokens[Int(fuzzer.generator.next(below: 3))] : "at_\(fuzzer.generator.token(8))"
            return fuzzer.percent(95) ? ["authorization": "Bearer \(token)"] : [:]
        } send: { request in
            fixture!.h.now = fixture!.h.now + .milliseconds(Int64(request.body.count % 1_000))
            let reply = fixture!.h.server.handle(request, now: fixture!.h.now)
            fixture!.h.apply(reply.outputs)
            return reply.response
        }
        #expect(outcome.failures.isEmpty, "\(outcome.failures.prefix(5))")
    }

    @Test("socket frames and tickets: junk never traps and every answer is a frame or nothing", .timeLimit(.minutes(2)))
    func frames() throws {
        var fuzzer = RequestFuzzer(defaultSeed: 0xF4A3)
        var fixture = try Fixture(fuzzer: &fuzzer)
        let kinds = ["typing.start", "typing.stop", "presence.update", "subscribe", "unknown"]
        for index in 0..<RequestFuzzer.count(default: 2_000) {
            var frame: [String: JSONValue] = ["type": .string(fuzzer.pick(kinds)), "channel_id": .string(fuzzer.pick(fuzzer.holes["channel"]!)),
                                              "status": "away"]
            var text = JSONValue.object(frame).canonicalText
            if fuzzer.percent(70) {
                frame["type"] = fuzzer.percent(80) ? frame["type"] : fuzzer.value()
                text = fuzzer.mutate(.object(frame)).canonicalText
            }
            if fuzzer.percent(5) { text = String(decoding: fuzzer.generator.bytes(Int(fuzzer.generator.next(below: 100))), as: UTF8.self) }
            let connection = fuzzer.percent(90) ? fuzzer.pick(fixture.sockets) : Int(fuzzer.generator.next(below: 1_000))
            fixture.h.frame(connection, text)
            if fuzzer.percent(2) {
                let result = fixture.h.server.connect(ticket: fuzzer.pick(RequestFuzzer.strings.filter { $0.utf8.count < 100 }), now: fixture.h.now)
                if case .accepted = result { Issue.record("a junk ticket was accepted; \(fuzzer.replay(index))") }
            }
        }
        #expect(fixture.h.server.state.connections.count >= 1)
    }
}
