import Testing
import LabKernel
@testable import LabCrypto

@Suite("LabCrypto primitives")
struct PrimitiveTests {
    @Test("HMAC-SHA256 matches RFC 4231 (short key, and a key longer than the block)")
    func hmac() throws {
        let key = [UInt8](repeating: 0x0b, count: 20)
        #expect(HMACSHA256.mac(key: key, message: Array("Hi There".utf8)).hexString
            == "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7")
        let long = [UInt8](repeating: 0xaa, count: 131)
        #expect(HMACSHA256.mac(key: long, message: Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8)).hexString
            == "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54")
        #expect(HMACSHA256.mac(key: [], message: []).count == 32)
    }

    @Test("HKDF matches RFC 5869 test cases 1 and 3 (zero-length salt and info)")
    func hkdf() throws {
        let ikm = [UInt8](repeating: 0x0b, count: 22)
        let salt = try #require([UInt8](hex: "000102030405060708090a0b0c"))
        let info = try #require([UInt8](hex: "f0f1f2f3f4f5f6f7f8f9"))
        #expect(HKDF.derive(salt: salt, ikm: ikm, info: info, count: 42).hexString
            == "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865")
        #expect(HKDF.derive(salt: [], ikm: ikm, info: [], count: 42).hexString
            == "8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8")
    }

    @Test("X25519 matches RFC 7748 §6.1 both ways; a low-order peer key is an error")
    func x25519() throws {
        let alice = try X25519.KeyPair(seed: try #require([UInt8](hex: "77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a")))
        let bob = try X25519.KeyPair(seed: try #require([UInt8](hex: "5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb")))
        #expect(alice.publicKey.hexString == "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a")
        #expect(try alice.sharedSecret(with: bob.publicKey).hexString == "4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742")
        #expect(try bob.sharedSecret(with: alice.publicKey) == alice.sharedSecret(with: bob.publicKey))
        #expect(throws: CryptoError.self) { try alice.sharedSecret(with: [UInt8](repeating: 0, count: 32)) }
        #expect(throws: CryptoError.badLength(what: "X25519 public key", expected: 32, found: 3)) { try alice.sharedSecret(with: [1, 2, 3]) }
    }

    @Test("an Ed25519 identity does DH in its X25519 form, from either side")
    func identityDH() throws {
        let identity = try Ed25519.SigningKey(seed: [UInt8](repeating: 9, count: 32))
        let curve = X25519.KeyPair(identity: identity)
        #expect(try X25519.publicKey(fromIdentity: identity.publicKey) == curve.publicKey)
        let peer = try X25519.KeyPair(seed: [UInt8](repeating: 4, count: 32))
        #expect(try curve.sharedSecret(with: peer.publicKey) == peer.sharedSecret(with: X25519.publicKey(fromIdentity: identity.publicKey)))
    }

    @Test("XChaCha20-Poly1305 round-trips and refuses a changed byte, key or associated data")
    func aead() throws {
        let keyNonce = [UInt8](0..<56)
        let plaintext = Array("attack at dawn".utf8), ad = Array("channel-1".utf8)
        func seal(_ p: [UInt8], _ k: [UInt8], _ a: [UInt8]) -> [UInt8] {
            var out = [UInt8](repeating: 0, count: p.count + 16)
            p.withUnsafeBytes { pp in k.withUnsafeBytes { kk in a.withUnsafeBytes { aa in out.withUnsafeMutableBytes {
                XChaCha20Poly1305.seal(pp, keyAndNonce: kk, ad: aa, into: $0) } } } }
            return out
        }
        func open(_ c: [UInt8], _ k: [UInt8], _ a: [UInt8]) -> [UInt8]? {
            var out = [UInt8](repeating: 0, count: c.count - 16)
            let ok = c.withUnsafeBytes { cc in k.withUnsafeBytes { kk in a.withUnsafeBytes { aa in out.withUnsafeMutableBytes {
                XChaCha20Poly1305.open(cc, keyAndNonce: kk, ad: aa, into: $0) } } } }
            return ok ? out : nil
        }
        let sealed = seal(plaintext, keyNonce, ad)
        #expect(open(sealed, keyNonce, ad) == plaintext)
        var flipped = sealed
        flipped[3] ^= 1
        #expect(open(flipped, keyNonce, ad) == nil)
        #expect(open(sealed, keyNonce, Array("channel-2".utf8)) == nil)
        #expect(open(sealed, [UInt8](1...56), ad) == nil)
        #expect(open(seal([], keyNonce, ad), keyNonce, ad) == [])
    }
}
