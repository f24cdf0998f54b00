public import LabKernel
import LabCrypto

/// The published test vectors of the profile (`docs/vectors/e2e-crypto-v1.json`, schema
/// in docs/chat.md): generated from fixed seeds, so the file is the same on every
/// machine, and verified by replaying every case from its seeds alone.
public enum CryptoVectors {
    public static let profile = "fleetlab-e2e-v1"

    /// A seed named by a label: SHA-256 of `"fleetlab-e2e-v1 <label>"`.
    static func seed(_ label: String) -> [UInt8] { SHA256.hash("\(profile) \(label)") }

    /// One ratchet conversation: `(from, plaintext)` in send order, and the send indexes in
    /// the order their receivers process them.
    static let conversation: (sends: [(from: String, text: String)], deliveries: [Int]) = (
        [("alice", "Hi Bob, this is the first message."), ("alice", "Are you there?"),
         ("bob", "Hello Alice."), ("bob", "Got both of yours."),
         ("alice", "Third chain from me."), ("alice", "This one overtakes the previous one."),
         ("bob", "Received, in the wrong order."), ("alice", "ünïcødé and an emoji 🔐")],
        [0, 1, 2, 3, 5, 4, 6, 7])

    public static func generate() throws(ChatCryptoError) -> JSONValue {
        var x3dhCases: [JSONValue] = []
        for (index, oneTime) in [true, false].enumerated() {
            let c = try X3DHCase(label: "x3dh-\(index)", oneTime: oneTime)
            x3dhCases.append(c.json)
        }
        let ratchet = try ratchetCase(x3dhIndex: 0)
        let group = try senderKeyCase()
        return ["profile": .string(profile), "x3dh": .array(x3dhCases), "double_ratchet": [ratchet], "sender_keys": [group]]
    }

    /// The text of the file: pretty JSON with a final newline.
    public static func fileText() throws(ChatCryptoError) -> String { try generate().prettyText + "\n" }

    struct X3DHCase {
        var seeds: [String: [UInt8]] = [:]
        let alice: IdentityKey, bob: IdentityKey, ephemeral: X25519.KeyPair
        let signedPreKey: PreKey, oneTime: PreKey?
        let bundle: PreKeyBundle
        let agreement: X3DH.Agreement
        /// DH1…DH3 (and DH4 with a one-time key), published so a third party can see which
        /// step of its own X3DH differs.
        let secrets: [[UInt8]]

        init(label: String, oneTime hasOneTime: Bool) throws(ChatCryptoError) {
            try self.init(alice: seed("\(label) alice identity"), ephemeral: seed("\(label) alice ephemeral"), bob: seed("\(label) bob identity"),
                          signedPreKey: seed("\(label) bob signed pre-key"), oneTime: hasOneTime ? seed("\(label) bob one-time pre-key") : nil)
        }

        init(alice a: [UInt8], ephemeral e: [UInt8], bob b: [UInt8], signedPreKey s: [UInt8], oneTime o: [UInt8]?) throws(ChatCryptoError) {
            seeds = ["alice_identity_seed": a, "alice_ephemeral_seed": e, "bob_identity_seed": b, "bob_signed_prekey_seed": s]
            if let o { seeds["bob_one_time_prekey_seed"] = o }
            alice = try IdentityKey(seed: a)
            bob = try IdentityKey(seed: b)
            do { ephemeral = try X25519.KeyPair(seed: e) } catch { throw .key(error) }
            signedPreKey = try PreKey(id: 1, seed: s)
            oneTime = try o.map { (seed: [UInt8]) throws(ChatCryptoError) in try PreKey(id: 1, seed: seed) }
            bundle = PreKeyBundle(identity: bob, signedPreKey: signedPreKey, oneTimePreKey: oneTime)
            agreement = try X3DH.initiate(identity: alice, ephemeral: ephemeral, bundle: bundle)
            secrets = try X3DH.initiatorSecrets(identity: alice, ephemeral: ephemeral, bundle: bundle)
        }

        var responderAgreement: X3DH.Agreement {
            get throws(ChatCryptoError) {
                try X3DH.respond(identity: bob, signedPreKey: signedPreKey, oneTimePreKey: oneTime, initiatorIdentity: alice.publicKey,
                                 initiatorEphemeral: ephemeral.publicKey)
            }
        }

        var json: JSONValue {
            var object = seeds.mapValues { JSONValue.string($0.hexString) }
            object["bob_one_time_prekey_seed"] = seeds["bob_one_time_prekey_seed"].map { .string($0.hexString) } ?? .null
            object["bob_signed_prekey_signature"] = .string(bundle.signedPreKeySignature.hexString)
            object["sk"] = .string(agreement.sharedKey.bytes.hexString)
            object["ad"] = .string(agreement.associatedData.hexString)
            for (index, name) in ["dh1", "dh2", "dh3", "dh4"].enumerated() {
                object[name] = secrets.indices.contains(index) ? .string(secrets[index].hexString) : .null
            }
            object["ikm"] = .string(([UInt8](repeating: 0xFF, count: 32) + secrets.flatMap { $0 }).hexString)
            return .object(object)
        }
    }

    struct RatchetMessage {
        var from: String
        var plaintext: String
        var newRatchetSeed: [UInt8]?
        var deliverOrder: Int
    }

    /// Plays a conversation: before a side sends message `i`, it reads (in deliver order)
    /// every message addressed to it with a lower index; what is left is read at the end.
    /// Every message must decrypt to its plaintext. Returns the wires and the seeds used.
    static func replay(_ setup: X3DHCase, firstRatchetSeed: [UInt8], _ messages: [RatchetMessage],
                       seedFor: (Int) -> [UInt8]) throws(ChatCryptoError) -> (wires: [[UInt8]], seeds: [[UInt8]?], messageKeys: [[UInt8]]) {
        let first: X25519.KeyPair
        do { first = try X25519.KeyPair(seed: firstRatchetSeed) } catch { throw .key(error) }
        var sessions = ["alice": try RatchetSession(initiator: setup.agreement, remoteSignedPreKey: setup.bundle.signedPreKey, firstRatchet: first),
                        "bob": RatchetSession(responder: try setup.responderAgreement, signedPreKey: setup.signedPreKey)]
        var wires: [[UInt8]] = []
        var seeds: [[UInt8]?] = []
        var messageKeys: [[UInt8]] = []
        var read = Set<Int>()
        func readAll(to side: String, below limit: Int) throws(ChatCryptoError) {
            let due = messages.indices.filter { $0 < limit && !read.contains($0) && messages[$0].from != side }
            for index in due.sorted(by: { messages[$0].deliverOrder < messages[$1].deliverOrder }) {
                let plaintext = try sessions[side]!.decrypt(wires[index])
                guard plaintext == Array(messages[index].plaintext.utf8) else { throw .malformed("message \(index) decrypts to other text") }
                read.insert(index)
            }
        }
        for (index, message) in messages.enumerated() {
            try readAll(to: message.from, below: index)
            var drawn: [UInt8]?
            var key: [UInt8] = []
            wires.append(try sessions[message.from]!.encrypt(Array(message.plaintext.utf8), nextRatchetSeed: {
                drawn = seedFor(index)
                return drawn!
            }, messageKey: { key = Array($0) }))
            seeds.append(drawn)
            messageKeys.append(key)
        }
        try readAll(to: "alice", below: messages.count)
        try readAll(to: "bob", below: messages.count)
        return (wires, seeds, messageKeys)
    }

    /// The AEAD key and nonce of a message key or seed: `HKDF(0³², ikm, info, 56)` split
    /// as key (bytes 0..<32) and nonce (32..<56).
    static func aead(_ ikm: [UInt8], info: [UInt8]) -> (key: [UInt8], nonce: [UInt8]) {
        ikm.withUnsafeBytes { i in withMessageKey(i, info: info) { (Array($0[0..<32]), Array($0[32..<56])) } }
    }

    /// What a ratchet message publishes besides its wire: header, message key, the AEAD's
    /// key, nonce and associated data.
    static func ratchetIntermediates(wire: [UInt8], messageKey: [UInt8], associatedData: [UInt8]) -> [String: JSONValue] {
        let header = Array(wire[1..<(1 + RatchetSession.headerCount)])
        let (key, nonce) = aead(messageKey, info: ProfileInfo.message)
        return ["header": .string(header.hexString), "message_key": .string(messageKey.hexString), "aead_key": .string(key.hexString),
                "aead_nonce": .string(nonce.hexString), "ad": .string((associatedData + header).hexString)]
    }

    /// What a sender-key message publishes besides its wire.
    static func groupIntermediates(wire: [UInt8], seed: [UInt8], channelID: String) -> [String: JSONValue] {
        let (key, nonce) = aead(seed, info: ProfileInfo.group)
        return ["message_seed": .string(seed.hexString), "aead_key": .string(key.hexString), "aead_nonce": .string(nonce.hexString),
                "ad": .string(Array(channelID.utf8).hexString), "signature": .string(Array(wire.suffix(64)).hexString)]
    }

    static func ratchetCase(x3dhIndex: Int) throws(ChatCryptoError) -> JSONValue {
        let setup = try X3DHCase(label: "x3dh-\(x3dhIndex)", oneTime: x3dhIndex == 0)
        let firstSeed = seed("ratchet alice first ratchet")
        var messages = conversation.sends.enumerated().map { index, send in
            RatchetMessage(from: send.from, plaintext: send.text, deliverOrder: conversation.deliveries.firstIndex(of: index)!)
        }
        let (wires, seeds, keys) = try replay(setup, firstRatchetSeed: firstSeed, messages) { seed("ratchet message \($0) ratchet") }
        for index in messages.indices { messages[index].newRatchetSeed = seeds[index] }
        let items: [JSONValue] = messages.indices.map { index in
            var item = ratchetIntermediates(wire: wires[index], messageKey: keys[index], associatedData: setup.agreement.associatedData)
            item["from"] = .string(messages[index].from)
            item["plaintext"] = .string(messages[index].plaintext)
            item["new_ratchet_seed"] = seeds[index].map { .string($0.hexString) } ?? .null
            item["deliver_order"] = .number(Double(messages[index].deliverOrder))
            item["wire"] = .string(wires[index].hexString)
            return .object(item)
        }
        return ["x3dh": .number(Double(x3dhIndex)), "alice_first_ratchet_seed": .string(firstSeed.hexString), "messages": .array(items)]
    }

    static func senderKeyCase() throws(ChatCryptoError) -> JSONValue {
        let channel = "7f1c2a6e-0d4b-4f8a-9c3e-5b2d1a0f9e87"
        let chainKey = seed("sender chain key"), signingSeed = seed("sender signing")
        var chain = try SenderKeyChain(channelID: channel, chainKey: chainKey, signingSeed: signingSeed)
        let texts = ["Welcome to the group.", "Second message.", "", "A longer fourth message, to show that lengths vary.", "fifth"]
        let messages: [JSONValue] = texts.map { text in
            let iteration = chain.iteration
            var seed: [UInt8] = []
            let wire = chain.encrypt(Array(text.utf8)) { seed = Array($0) }
            var item = groupIntermediates(wire: wire, seed: seed, channelID: channel)
            item["iteration"] = .number(Double(iteration))
            item["plaintext"] = .string(text)
            item["wire"] = .string(wire.hexString)
            return .object(item)
        }
        return ["channel_id": .string(channel), "chain_key": .string(chainKey.hexString), "signing_seed": .string(signingSeed.hexString),
                "messages": .array(messages)]
    }
}
