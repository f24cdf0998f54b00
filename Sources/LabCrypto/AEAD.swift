internal import CSodium

/// XChaCha20-Poly1305 (IETF) AEAD: 32-byte key, 24-byte nonce, 16-byte tag appended.
public enum XChaCha20Poly1305 {
    public static let keyCount = 32
    public static let nonceCount = 24
    public static let tagCount = 16

    /// Ciphertext with the tag appended. `keyAndNonce` is the 32-byte key (bytes 0..<32)
    /// then the 24-byte nonce (bytes 32..<56), the HKDF output of the profile split as
    /// `specs/e2e-crypto.md` fixes it.
    public static func seal(_ plaintext: UnsafeRawBufferPointer, keyAndNonce: UnsafeRawBufferPointer, ad: UnsafeRawBufferPointer,
                            into out: UnsafeMutableRawBufferPointer) {
        precondition(keyAndNonce.count == keyCount + nonceCount && out.count == plaintext.count + tagCount)
        Sodium.ensureReady()
        let key = keyAndNonce.baseAddress!.assumingMemoryBound(to: UInt8.self)
        var written: UInt64 = 0
        _ = crypto_aead_xchacha20poly1305_ietf_encrypt(
            out.baseAddress!.assumingMemoryBound(to: UInt8.self), &written,
            plaintext.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(plaintext.count),
            ad.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(ad.count), nil, key + keyCount, key)
    }

    /// The plaintext, or false when the tag does not authenticate.
    public static func open(_ ciphertext: UnsafeRawBufferPointer, keyAndNonce: UnsafeRawBufferPointer, ad: UnsafeRawBufferPointer,
                            into out: UnsafeMutableRawBufferPointer) -> Bool {
        precondition(keyAndNonce.count == keyCount + nonceCount && ciphertext.count >= tagCount && out.count == ciphertext.count - tagCount)
        Sodium.ensureReady()
        let key = keyAndNonce.baseAddress!.assumingMemoryBound(to: UInt8.self)
        var written: UInt64 = 0
        // An empty plaintext still needs somewhere to write to.
        var empty: UInt8 = 0
        return withUnsafeMutablePointer(to: &empty) { spare in
            let target = out.count == 0 ? spare : out.baseAddress!.assumingMemoryBound(to: UInt8.self)
            return crypto_aead_xchacha20poly1305_ietf_decrypt(
                target, &written, nil, ciphertext.baseAddress!.assumingMemoryBound(to: UInt8.self), UInt64(ciphertext.count),
                ad.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(ad.count), key + keyCount, key) == 0
        }
    }
}

/// Random bytes from libsodium (`randombytes_buf`): live-mode key seeds. The simulator
/// draws seeds from its seeded streams instead.
public enum SystemRandom {
    public static func bytes(_ count: Int) -> [UInt8] {
        Sodium.ensureReady()
        var out = [UInt8](repeating: 0, count: count)
        if count > 0 { out.withUnsafeMutableBytes { randombytes_buf($0.baseAddress!, $0.count) } }
        return out
    }
}
