internal import CSodium
import ChatCrypto
import LabCrypto

extension CryptoBenchmark {
    /// Keys, sessions and messages for one benchmark run, and the bare-call replicas.
    struct Fixture {
        let alice: IdentityKey, bob: IdentityKey
        let signedPreKey: PreKey, oneTime: PreKey
        let bundle: PreKeyBundle
        let plaintext: [UInt8]
        var seedCounter: UInt64 = 0
        var aliceSession: RatchetSession, bobSession: RatchetSession
        var sender: SenderKeyChain, receiver: SenderKeyReceiver
        var groupWires: [[UInt8]] = []
        // Bare state: raw keys and buffers, allocated once.
        var bare = BareBuffers()

        init(messageBytes: Int) throws(ChatCryptoError) {
            alice = try IdentityKey(seed: SHA256.hash("bench alice"))
            bob = try IdentityKey(seed: SHA256.hash("bench bob"))
            signedPreKey = try PreKey(id: 1, seed: SHA256.hash("bench spk"))
            oneTime = try PreKey(id: 2, seed: SHA256.hash("bench opk"))
            bundle = PreKeyBundle(identity: bob, signedPreKey: signedPreKey, oneTimePreKey: oneTime)
            plaintext = [UInt8](repeating: 0x61, count: messageBytes)
            aliceSession = RatchetSession(responder: try X3DH.respond(identity: bob, signedPreKey: signedPreKey, oneTimePreKey: nil,
                                                                      initiatorIdentity: alice.publicKey, initiatorEphemeral: signedPreKey.publicKey),
                                          signedPreKey: signedPreKey)
            bobSession = aliceSession
            sender = try SenderKeyChain(channelID: "bench-channel", chainKey: SHA256.hash("bench ck"), signingSeed: SHA256.hash("bench sign"))
            receiver = SenderKeyReceiver(channelID: "bench-channel", distribution: sender.distribution)
        }

        mutating func nextSeed() -> [UInt8] {
            seedCounter += 1
            return withUnsafeBytes(of: seedCounter) { SHA256.hash(Array($0)) }
        }

        /// Fresh sessions and chains for a round, so both sides start from the same state.
        mutating func prepare(name: String, count: Int) throws(ChatCryptoError) {
            let ephemeral: X25519.KeyPair
            do { ephemeral = try X25519.KeyPair(seed: nextSeed()) } catch { throw .key(error) }
            let a = try X3DH.initiate(identity: alice, ephemeral: ephemeral, bundle: bundle)
            let b = try X3DH.respond(identity: bob, signedPreKey: signedPreKey, oneTimePreKey: oneTime, initiatorIdentity: alice.publicKey,
                                     initiatorEphemeral: ephemeral.publicKey)
            let first: X25519.KeyPair
            do { first = try X25519.KeyPair(seed: nextSeed()) } catch { throw .key(error) }
            aliceSession = try RatchetSession(initiator: a, remoteSignedPreKey: bundle.signedPreKey, firstRatchet: first)
            bobSession = RatchetSession(responder: b, signedPreKey: signedPreKey)
            bare.reset(chainKey: SHA256.hash("bare ck"), ad: a.associatedData, ratchet: first.publicKey, plaintextBytes: plaintext.count)
            sender = try SenderKeyChain(channelID: "bench-channel", chainKey: SHA256.hash("bench ck"), signingSeed: SHA256.hash("bench sign"))
            receiver = SenderKeyReceiver(channelID: "bench-channel", distribution: sender.distribution)
            if name.hasPrefix("group verify") {
                var source = sender
                groupWires = (0..<count).map { _ in source.encrypt(plaintext) }
            }
        }

        // MARK: Ours

        mutating func handshakes(_ n: Int) throws(ChatCryptoError) {
            for _ in 0..<n {
                let ephemeral: X25519.KeyPair
                do { ephemeral = try X25519.KeyPair(seed: bare.seed) } catch { throw .key(error) }
                let a = try X3DH.initiate(identity: alice, ephemeral: ephemeral, bundle: bundle)
                let b = try X3DH.respond(identity: bob, signedPreKey: signedPreKey, oneTimePreKey: oneTime, initiatorIdentity: alice.publicKey,
                                         initiatorEphemeral: ephemeral.publicKey)
                bare.sink ^= a.associatedData.count ^ b.associatedData.count
            }
        }

        mutating func ratchetMessages(_ n: Int) throws(ChatCryptoError) {
            for _ in 0..<n {
                let wire = try aliceSession.encrypt(plaintext) { [] }
                bare.sink ^= try bobSession.decrypt(wire).count
            }
        }

        mutating func groupSends(_ n: Int) {
            for _ in 0..<n { bare.sink ^= sender.encrypt(plaintext).count }
        }

        mutating func groupReceives(_ n: Int) throws(ChatCryptoError) {
            for wire in groupWires.prefix(n) { bare.sink ^= try receiver.decrypt(wire).count }
        }
    }
}
