import ChatCrypto
import Foundation
import LabCrypto
import LabKernel
@testable import SecureChatServer

/// A chat server core driven by hand: requests at a controllable `now`, sockets by id,
/// and every frame each connection received.
struct ChatHarness {
    var server: ChatServer
    var now = Instant.zero + .seconds(1)
    var frames: [Int: [JSONValue]] = [:]
    var closed: [Int: UInt16] = [:]
    /// The rows the replies since the last `takeChanges` wrote.
    var changes: [ChatStoreChange] = []

    mutating func takeChanges() -> [ChatStoreChange] {
        defer { changes = [] }
        return changes
    }

    init(configure: (inout ChatServerConfig) -> Void = { _ in }) {
        var config = ChatServerConfig()
        config.passwordCost = .minimum
        // Tests that are about routing, not encryption, post plaintext into legacy groups.
        config.allowLegacyPlaintext = true
        configure(&config)
        server = ChatServer(config: config, seed: StreamSeed(77), wallClock: .simulationEpoch)
    }

    struct Account {
        var userID: String
        var deviceID: String
        var access: String
        var refresh: String
        var username: String
    }

    @discardableResult
    mutating func send(_ method: String, _ target: String, _ body: JSONValue? = nil, token: String? = nil, raw: String? = nil,
                       headers: [String: String] = [:]) -> HTTPResponseMessage {
        var all = headers
        if let token { all["authorization"] = "Bearer \(token)" }
        var bytes: [UInt8] = raw.map { Array($0.utf8) } ?? []
        if let body { body.write(to: &bytes) }
        let reply = server.handle(HTTPRequestMessage(method: method, target: "/api/v1" + target, headers: all, body: bytes), now: now)
        apply(reply.outputs)
        changes += reply.changes
        return reply.response
    }

    mutating func apply(_ outputs: [ChatOutput]) {
        for output in outputs {
            switch output {
            case .send(let connection, let payload): frames[connection, default: []].append(payload)
            case .close(let connection, let code, _): closed[connection] = code
            }
        }
    }

    mutating func register(_ username: String, password: String = "correct horse") -> Account {
        let r = send("POST", "/auth/register", ["username": .string(username), "password": .string(password)])
        return account(r, username)
    }

    mutating func login(_ username: String, password: String = "correct horse", device: String = "second") -> (HTTPResponseMessage, Account?) {
        let r = send("POST", "/auth/login", ["username": .string(username), "password": .string(password), "device_name": .string(device)])
        return (r, r.status == 200 ? account(r, username) : nil)
    }

    func account(_ r: HTTPResponseMessage, _ username: String) -> Account {
        let j = r.jsonBody
        return Account(userID: j?["user_id"]?.stringValue ?? "", deviceID: j?["device_id"]?.stringValue ?? "",
                       access: j?["access_token"]?.stringValue ?? "", refresh: j?["refresh_token"]?.stringValue ?? "", username: username)
    }

    /// A group on the legacy plaintext protocol, owned by `account`; its id.
    mutating func legacyGroup(_ account: Account, _ name: String = "g", visibility: String = "private") -> String {
        send("POST", "/channels", ["name": .string(name), "legacy_plaintext": true, "visibility": .string(visibility)],
             token: account.access).jsonBody?["id"]?.stringValue ?? ""
    }

    /// Uploads a key bundle for the account's device (keys from `label`), with
    /// `oneTime` one-time keys: the device becomes one others can encrypt to.
    @discardableResult
    mutating func uploadKeys(_ account: Account, _ label: String, oneTime: Int = 0) throws -> HTTPResponseMessage {
        let identity = try IdentityKey(seed: SHA256.hash("\(label) id")), spk = try PreKey(id: 1, seed: SHA256.hash("\(label) spk"))
        let bundle = PreKeyBundle(identity: identity, signedPreKey: spk, oneTimePreKey: nil)
        return send("POST", "/keys/upload", ["device_id": .string(account.deviceID), "identity_key": .string(Base64.encode(identity.publicKey)),
                                             "signed_pre_key": .string(Base64.encode(spk.publicKey)),
                                             "signed_pre_key_signature": .string(Base64.encode(bundle.signedPreKeySignature)),
                                             "one_time_pre_keys": .array((0..<oneTime).map { .string(Base64.encode(SHA256.hash("\(label) otk \($0)"))) })],
                    token: account.access)
    }

    /// A socket for the account: ticket, then connect.
    mutating func socket(_ account: Account) -> Int? {
        let ticket = send("POST", "/auth/ws-ticket", token: account.access).jsonBody?["ticket"]?.stringValue ?? ""
        if case .accepted(let id) = server.connect(ticket: ticket, now: now) { return id }
        return nil
    }

    mutating func frame(_ connection: Int, _ text: String) { apply(server.receive(connection, text: text, now: now)) }

    func events(_ connection: Int, _ type: String) -> [JSONValue] { (frames[connection] ?? []).filter { $0["type"]?.stringValue == type } }

    /// A fingerprint of the state a refused request must not change.
    var fingerprint: String {
        let s = server.state
        return "\(s.users.count) \(s.devices.count) \(s.channels.count) \(s.messages.count) \(s.bundles.values.map(\.oneTimeKeys.count).sorted()) "
            + "\(s.members.values.map(\.count).sorted()) \(s.refreshTokens.values.filter { $0.state == .active }.count) \(s.messageByClientID.count)"
    }
}

extension HTTPResponseMessage {
    var detail: String { jsonBody?["detail"]?.stringValue ?? jsonBody?["detail"]?.arrayValue?.first?["msg"]?.stringValue ?? "" }
    var detailType: String { jsonBody?["detail"]?.arrayValue?.first?["type"]?.stringValue ?? "" }
    var detailLoc: [String] { jsonBody?["detail"]?.arrayValue?.first?["loc"]?.arrayValue?.compactMap(\.stringValue) ?? [] }
}
