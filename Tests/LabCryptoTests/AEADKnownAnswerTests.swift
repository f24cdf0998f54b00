import CSodium
import Testing
import LabKernel
@testable import LabCrypto

/// The profile's AEAD is XChaCha20-Poly1305 with the 56 bytes of HKDF output split as key
/// (0..<32) and nonce (32..<56). These answers come from libsodium called directly, with
/// the key and the nonce in separate buffers, so a wrong split cannot agree with itself.
@Suite("XChaCha20-Poly1305 known answers")
struct AEADKnownAnswerTests {
    /// libsodium's own encryption of `plaintext`, key and nonce passed separately.
    static func bare(key: [UInt8], nonce: [UInt8], ad: [UInt8], plaintext: [UInt8]) -> [UInt8] {
        _ = sodium_init()
        var out = [UInt8](repeating: 0, count: plaintext.count + 16)
        var written: UInt64 = 0
        _ = crypto_aead_xchacha20poly1305_ietf_encrypt(&out, &written, plaintext, UInt64(plaintext.count), ad, UInt64(ad.count), nil, nonce, key)
        return out
    }

    static func seal(keyAndNonce: [UInt8], ad: [UInt8], plaintext: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: plaintext.count + 16)
        plaintext.withUnsafeBytes { p in keyAndNonce.withUnsafeBytes { k in ad.withUnsafeBytes { a in
            out.withUnsafeMutableBytes { XChaCha20Poly1305.seal(p, keyAndNonce: k, ad: a, into: $0) }
        } } }
        return out
    }

    @Test("the draft-irtf-cfrg-xchacha test vector (A.3.1), through the profile's key-then-nonce buffer")
    func publishedVector() throws {
        let key = try #require([UInt8](hex: "808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f"))
        let nonce = try #require([UInt8](hex: "404142434445464748494a4b4c4d4e4f5051525354555657"))
        let ad = try #require([UInt8](hex: "50515253c0c1c2c3c4c5c6c7"))
        let plaintext = Array("Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, sunscreen would be it.".utf8)
        let expected = "bd6d179d3e83d43b9576579493c0e939572a1700252bfaccbed2902c21396cbb731c7f1b0b4aa6440bf3a82f4eda7e39ae64c6708c54c216cb96b72e1213b4522f8c9ba40db5d945b11b69b982c1bb9e3f3fac2bc369488f76b2383565d3fff921f9664c97637da9768812f615c68b13b52e"
            + "c0875924c1c7987947deafd8780acf49"
        #expect(Self.bare(key: key, nonce: nonce, ad: ad, plaintext: plaintext).hexString == expected, "libsodium itself")
        #expect(Self.seal(keyAndNonce: key + nonce, ad: ad, plaintext: plaintext).hexString == expected)
    }

    @Test("for keys and nonces from a seeded stream, seal equals libsodium with key and nonce apart, and open undoes it")
    func agreesWithBareLibsodium() {
        var generator = SeededGenerator(seed: 56)
        for length in [0, 1, 15, 16, 17, 100, 1_000] {
            let key = generator.bytes(32), nonce = generator.bytes(24), ad = generator.bytes(Int(generator.next(below: 80)))
            let plaintext = generator.bytes(length)
            let sealed = Self.seal(keyAndNonce: key + nonce, ad: ad, plaintext: plaintext)
            #expect(sealed == Self.bare(key: key, nonce: nonce, ad: ad, plaintext: plaintext), "\(length) bytes")
            var opened = [UInt8](repeating: 0, count: length)
            let ok = sealed.withUnsafeBytes { c in (key + nonce).withUnsafeBytes { k in ad.withUnsafeBytes { a in
                opened.withUnsafeMutableBytes { XChaCha20Poly1305.open(c, keyAndNonce: k, ad: a, into: $0) }
            } } }
            #expect(ok && opened == plaintext)
            // The old split (nonce from bytes 24..<48) must not be what is used.
            let wrongNonce = Array((key + nonce)[24..<48])
            #expect(sealed != Self.bare(key: key, nonce: wrongNonce, ad: ad, plaintext: plaintext))
        }
    }
}
