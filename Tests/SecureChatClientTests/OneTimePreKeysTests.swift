import ChatCrypto
import Foundation
import LabCrypto
import LabKernel
import Testing
@testable import SecureChatClient

/// A device's unused one-time pre-keys, kept as fixed-size values: each is found by the
/// public key a first message names, once, and survives being stored and read back.
@Suite("Chat client: one-time pre-keys")
struct OneTimePreKeysTests {
    @Test("a key is found by its public key as the pre-key it was made from, used once, and kept through a stored snapshot")
    func findUseAndStore() throws {
        var generator = StreamSeed(7).generator()
        var store = try ChatKeyStore(generator: &generator)
        let uploaded = try store.makeOneTimeKeys(3, generator: &generator).map { try #require(Base64.decode($0)) }
        #expect(store.oneTimeKeys.count == 3 && Set(uploaded.map(Base64.encode)).count == 3)
        let second = try #require(try store.oneTimeKeys.key(publicKey: uploaded[1]))
        #expect(second.publicKey == uploaded[1] && second.id == 3, "ids go on from the signed pre-key's")

        let stored = try JSONDecoder().decode(ChatKeyStore.self, from: JSONEncoder().encode(store))
        for key in uploaded { #expect(try stored.oneTimeKeys.key(publicKey: key)?.pair.seed == store.oneTimeKeys.key(publicKey: key)?.pair.seed) }

        store.oneTimeKeys.remove(publicKey: uploaded[1])
        #expect(try store.oneTimeKeys.key(publicKey: uploaded[1]) == nil && store.oneTimeKeys.count == 2)
        #expect(try store.oneTimeKeys.key(publicKey: [1, 2, 3]) == nil, "not a key at all")
    }

    @Test("a first message names the one-time key it used: the receiver decrypts it once, and the same X3DH data again is refused")
    func usedOnce() throws {
        var generator = StreamSeed(8).generator()
        var alice = try ChatKeyStore(generator: &generator), bob = try ChatKeyStore(generator: &generator)
        let published = try #require(Base64.decode(try bob.makeOneTimeKeys(2, generator: &generator)[0]))
        let bundle = PreKeyBundle(identity: bob.identity, signedPreKey: bob.signedPreKey,
                                  oneTimePreKey: try bob.oneTimeKeys.key(publicKey: published))
        let item = try alice.encrypt(Array("hello".utf8), for: "bob-device", bundle: bundle, generator: &generator)
        #expect(item.prekey?.oneTimeKey == published)
        var replayer = bob
        #expect(try bob.decrypt(item, from: "alice-device") == Array("hello".utf8))
        #expect(bob.oneTimeKeys.count == 1)
        bob.sessions = [:]
        #expect(throws: ChatCryptoError.self) { try bob.decrypt(item, from: "alice-device") }
        #expect(try replayer.decrypt(item, from: "alice-device") == Array("hello".utf8), "a copy taken before still had the key")
    }
}
