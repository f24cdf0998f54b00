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
                       seedFor: (Int) -> [UInt8]) throws(ChatCryptoError) -> (wires: [[UInt8]], seeds: [[UInt8]?]) {
        let first: X25519.KeyPair
        do { first = try X25519.KeyPair(seed: firstRatchetSeed) } catch { throw .key(error) }
        var sessions = ["alice": try RatchetSession(initiator: setup.agreement, remoteSignedPreKey: setup.bundle.signedPreKey, firstRatchet: first),
                        "bob": RatchetSession(responder: try setup.responderAgreement, signedPreKey: setup.signedPreKey)]
        var wires: [[UInt8]] = []
        var seeds: [[UInt8]?] = []
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
            wires.append(try sessions[message.from]!.encrypt(Array(message.plaintext.utf8)) {
                drawn = seedFor(index)
                return drawn!
            })
            seeds.append(drawn)
        }
        try readAll(to: "alice", below: messages.count)
        try readAll(to: "bob", below: messages.count)
        return (wires, seeds)
    }

    static func ratchetCase(x3dhIndex: Int) throws(ChatCryptoError) -> JSONValue {
        let setup = try X3DHCase(label: "x3dh-\(x3dhIndex)", oneTime: x3dhIndex == 0)
        let firstSeed = seed("ratchet alice first ratchet")
        var messages = conversation.sends.enumerated().map { index, send in
            RatchetMessage(from: send.from, plaintext: send.text, deliverOrder: conversation.deliveries.firstIndex(of: index)!)
        }
        let (wires, seeds) = try replay(setup, firstRatchetSeed: firstSeed, messages) { seed("ratchet message \($0) ratchet") }
        for index in messages.indices { messages[index].newRatchetSeed = seeds[index] }
        let items: [JSONValue] = messages.indices.map { index in
            ["from": .string(messages[index].from), "plaintext": .string(messages[index].plaintext),
             "new_ratchet_seed": seeds[index].map { .string($0.hexString) } ?? .null,
             "deliver_order": .number(Double(messages[index].deliverOrder)), "wire": .string(wires[index].hexString)]
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
            return ["iteration": .number(Double(iteration)), "plaintext": .string(text), "wire": .string(chain.encrypt(Array(text.utf8)).hexString)]
        }
        return ["channel_id": .string(channel), "chain_key": .string(chainKey.hexString), "signing_seed": .string(signingSeed.hexString),
                "messages": .array(messages)]
    }
}
