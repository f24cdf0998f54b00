import Foundation
import Testing
import LabCrypto
import LabKernel
@testable import ChatCrypto

/// Two devices with keys from fixed seeds.
struct Pair {
    var counter: UInt8 = 100
    let alice: IdentityKey, bob: IdentityKey
    let bobSignedPreKey: PreKey, bobOneTime: PreKey

    init() throws {
        alice = try IdentityKey(seed: Self.seed(1))
        bob = try IdentityKey(seed: Self.seed(2))
        bobSignedPreKey = try PreKey(id: 1, seed: Self.seed(3))
        bobOneTime = try PreKey(id: 7, seed: Self.seed(4))
    }

    static func seed(_ n: UInt8) -> [UInt8] { SHA256.hash([n]) }

    mutating func nextSeed() -> [UInt8] {
        counter += 1
        return Self.seed(counter)
    }

    /// Alice's and Bob's sessions after X3DH (with Bob's one-time key when `oneTime`).
    mutating func sessions(oneTime: Bool = true) throws -> (RatchetSession, RatchetSession) {
        let ephemeral = try X25519.KeyPair(seed: nextSeed())
        let bundle = PreKeyBundle(identity: bob, signedPreKey: bobSignedPreKey, oneTimePreKey: oneTime ? bobOneTime : nil)
        let a = try X3DH.initiate(identity: alice, ephemeral: ephemeral, bundle: bundle)
        let b = try X3DH.respond(identity: bob, signedPreKey: bobSignedPreKey, oneTimePreKey: oneTime ? bobOneTime : nil,
                                 initiatorIdentity: alice.publicKey, initiatorEphemeral: ephemeral.publicKey)
        #expect(a.sharedKey == b.sharedKey && a.associatedData == b.associatedData)
        let first = try X25519.KeyPair(seed: nextSeed())
        return (try RatchetSession(initiator: a, remoteSignedPreKey: bundle.signedPreKey, firstRatchet: first),
                RatchetSession(responder: b, signedPreKey: bobSignedPreKey))
    }
}

@Suite("Chat crypto: X3DH and the Double Ratchet")
struct SessionTests {
    @Test("X3DH agrees with and without a one-time key, and the two secrets differ; a bad pre-key signature is refused")
    func x3dh() throws {
        var pair = try Pair()
        let ephemeral = try X25519.KeyPair(seed: pair.nextSeed())
        let with = PreKeyBundle(identity: pair.bob, signedPreKey: pair.bobSignedPreKey, oneTimePreKey: pair.bobOneTime)
        var without = with
        without.oneTimePreKey = nil
        let a1 = try X3DH.initiate(identity: pair.alice, ephemeral: ephemeral, bundle: with)
        let a2 = try X3DH.initiate(identity: pair.alice, ephemeral: ephemeral, bundle: without)
        #expect(a1.sharedKey != a2.sharedKey)
        #expect(a1.associatedData == pair.alice.publicKey + pair.bob.publicKey)
        var forged = with
        forged.signedPreKey = try X25519.KeyPair(seed: pair.nextSeed()).publicKey
        #expect(throws: ChatCryptoError.badPreKeySignature) { try X3DH.initiate(identity: pair.alice, ephemeral: ephemeral, bundle: forged) }
    }

    @Test("a conversation turns direction, and out-of-order messages decrypt once each")
    func conversation() throws {
        var pair = try Pair()
        var (alice, bob) = try pair.sessions()
        #expect(!bob.canSend)
        #expect(throws: ChatCryptoError.cannotSendYet) { try bob.encrypt([1], nextRatchetSeed: { pair.nextSeed() }) }
        let a1 = try alice.encrypt(Array("hi bob".utf8), nextRatchetSeed: { pair.nextSeed() })
        let a2 = try alice.encrypt(Array("still me".utf8), nextRatchetSeed: { pair.nextSeed() })
        #expect(a1[0] == 0x02 && a1.count == 1 + 40 + 6 + 16)
        #expect(String(decoding: try bob.decrypt(a2), as: UTF8.self) == "still me")
        #expect(String(decoding: try bob.decrypt(a1), as: UTF8.self) == "hi bob", "a skipped key decrypts a late message")
        #expect(throws: ChatCryptoError.replay(iteration: 0)) { try bob.decrypt(a1) }
        var turned = 0
        let b1 = try bob.encrypt(Array("hello alice".utf8), nextRatchetSeed: { turned += 1; return pair.nextSeed() })
        #expect(turned == 1 && Array(b1[1..<33]) != Array(a1[1..<33]))
        #expect(String(decoding: try alice.decrypt(b1), as: UTF8.self) == "hello alice")
        for n in 0..<5 {
            let m = try alice.encrypt(Array("n\(n)".utf8), nextRatchetSeed: { pair.nextSeed() })
            #expect(String(decoding: try bob.decrypt(m), as: UTF8.self) == "n\(n)")
        }
        let empty = try bob.encrypt([], nextRatchetSeed: { pair.nextSeed() })
        #expect(try alice.decrypt(empty) == [])
    }

    @Test("messages from an older chain still decrypt after the ratchet turned (PN skips them)")
    func previousChain() throws {
        var pair = try Pair()
        var (alice, bob) = try pair.sessions(oneTime: false)
        let a1 = try alice.encrypt([1], nextRatchetSeed: { pair.nextSeed() })
        let lost = try alice.encrypt([2], nextRatchetSeed: { pair.nextSeed() })
        _ = try bob.decrypt(a1)
        _ = try alice.decrypt(try bob.encrypt([3], nextRatchetSeed: { pair.nextSeed() }))
        let a3 = try alice.encrypt([4], nextRatchetSeed: { pair.nextSeed() })
        #expect(try bob.decrypt(a3) == [4])
        #expect(try bob.decrypt(lost) == [2])
    }

    @Test("a changed byte, a truncated message, a wrong version and too large a gap are typed errors that change nothing")
    func hostileInput() throws {
        var pair = try Pair()
        var (alice, bob) = try pair.sessions()
        let m = try alice.encrypt(Array("payload".utf8), nextRatchetSeed: { pair.nextSeed() })
        for index in [0, 5, 35, 39, 45, m.count - 1] {
            var changed = m
            changed[index] ^= 0x40
            let before = bob
            #expect(throws: ChatCryptoError.self) { try bob.decrypt(changed) }
            #expect(bob.receiveCount == before.receiveCount && bob.remoteRatchet == before.remoteRatchet && bob.skipped.isEmpty)
        }
        #expect(throws: ChatCryptoError.malformed("a ratchet message is at least 57 bytes, found 20")) { try bob.decrypt(Array(m.prefix(20))) }
        var far = m
        far[37...40] = [0, 0, 0x03, 0xE9]  // N = 1001
        #expect(throws: ChatCryptoError.gapTooLarge(skipped: 1001, limit: 1000)) { try bob.decrypt(far) }
        #expect(try bob.decrypt(m) == Array("payload".utf8), "the real message still decrypts after the forgeries")
    }

    @Test("a gap of exactly 1,000 is allowed; skipped keys are used once")
    func gapLimit() throws {
        var pair = try Pair()
        var (alice, bob) = try pair.sessions()
        var messages: [[UInt8]] = []
        for n in 0...1000 { messages.append(try alice.encrypt([UInt8(n % 256)], nextRatchetSeed: { pair.nextSeed() })) }
        #expect(try bob.decrypt(messages[1000]) == [UInt8(1000 % 256)])
        #expect(bob.skipped.count == 1000)
        #expect(try bob.decrypt(messages[17]) == [17])
        #expect(throws: ChatCryptoError.replay(iteration: 17)) { try bob.decrypt(messages[17]) }
        #expect(bob.skipped.count == 999)
    }

    @Test("a session stored mid-conversation (with skipped keys) and read back carries on exactly")
    func storedSession() throws {
        var pair = try Pair()
        var (alice, bob) = try pair.sessions()
        let late = try alice.encrypt([1], nextRatchetSeed: { pair.nextSeed() })
        _ = try bob.decrypt(try alice.encrypt([2], nextRatchetSeed: { pair.nextSeed() }))
        let bytes = try JSONEncoder().encode(bob)
        #expect(!String(decoding: bytes, as: UTF8.self).isEmpty)
        var restored = try JSONDecoder().decode(RatchetSession.self, from: bytes)
        #expect(try restored.decrypt(late) == [1], "the skipped key survived")
        let reply = try restored.encrypt([3], nextRatchetSeed: { pair.nextSeed() })
        #expect(try alice.decrypt(reply) == [3])
        var chain = try SenderKeyChain(channelID: "c", chainKey: SHA256.hash("k"), signingSeed: SHA256.hash("s"))
        var receiver = SenderKeyReceiver(channelID: "c", distribution: chain.distribution)
        let m = chain.encrypt([9])
        var storedReceiver = try JSONDecoder().decode(SenderKeyReceiver.self, from: JSONEncoder().encode(receiver))
        var storedChain = try JSONDecoder().decode(SenderKeyChain.self, from: JSONEncoder().encode(chain))
        #expect(try storedReceiver.decrypt(m) == [9] && receiver.decrypt(m) == [9])
        #expect(try storedReceiver.decrypt(storedChain.encrypt([10])) == [10])
    }
}
