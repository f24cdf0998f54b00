import Testing
import LabKernel
@testable import LabCrypto

@Suite("LabCrypto")
struct LabCryptoTests {
    @Test("SHA-256 matches the FIPS 180-2 vectors")
    func sha256() {
        #expect(SHA256.hash("abc").hexString == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(SHA256.hash("").hexString == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    }

    /// RFC 8032 §7.1, test 2 (one-byte message).
    @Test("Ed25519 signs like RFC 8032 and verifies only the exact bytes and key")
    func ed25519() throws {
        let seed = try #require([UInt8](hex: "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb"))
        let key = try Ed25519.SigningKey(seed: seed)
        #expect(key.publicKey.hexString == "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c")
        let signature = key.sign([0x72])
        #expect(signature.hexString == "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da"
            + "085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00")
        #expect(Ed25519.verify(signature: signature, message: [0x72], publicKey: key.publicKey))
        #expect(!Ed25519.verify(signature: signature, message: [0x73], publicKey: key.publicKey))
        var flipped = signature
        flipped[10] ^= 1
        #expect(!Ed25519.verify(signature: flipped, message: [0x72], publicKey: key.publicKey))
        let other = try Ed25519.SigningKey(seed: [UInt8](repeating: 7, count: 32))
        #expect(!Ed25519.verify(signature: signature, message: [0x72], publicKey: other.publicKey))
        #expect(!Ed25519.verify(signature: Array(signature.prefix(63)), message: [0x72], publicKey: key.publicKey))
        #expect(key.seed == seed)
        #expect(throws: CryptoError.badLength(what: "Ed25519 seed", expected: 32, found: 31)) { try Ed25519.SigningKey(seed: Array(seed.prefix(31))) }
    }

    @Test("base64 round-trips and refuses what is not padded standard base64", arguments: [
        ("", []), ("Zg==", [0x66]), ("Zm8=", [0x66, 0x6f]), ("Zm9v", [0x66, 0x6f, 0x6f]), ("Zm9vYg==", [0x66, 0x6f, 0x6f, 0x62]),
    ] as [(String, [UInt8])])
    func base64(text: String, bytes: [UInt8]) {
        #expect(Base64.encode(bytes) == text)
        #expect(Base64.decode(text) == bytes)
    }

    @Test("malformed base64 is nil", arguments: ["Zg", "Zg=", "Z===", "Zm9v!===", "Zh==", "Zg==Zg==", "=Zg="])
    func badBase64(text: String) {
        #expect(Base64.decode(text) == nil)
    }

    @Test("constant-time comparison")
    func compare() {
        #expect(ConstantTime.equal([1, 2, 3], [1, 2, 3]))
        #expect(!ConstantTime.equal([1, 2, 3], [1, 2, 4]))
        #expect(!ConstantTime.equal([1, 2, 3], [1, 2]))
    }
}
