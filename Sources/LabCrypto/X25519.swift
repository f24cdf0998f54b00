internal import CSodium

/// X25519 (`crypto_scalarmult`): a key pair's private key is its 32-byte seed, as the
/// chat profile fixes (docs/chat-crypto.md).
public enum X25519 {
    public static let keyCount = 32

    public struct KeyPair: Sendable {
        public let publicKey: [UInt8]
        let secret: SecretBytes

        public init(seed: [UInt8]) throws(CryptoError) {
            guard seed.count == keyCount else { throw .badLength(what: "X25519 seed", expected: keyCount, found: seed.count) }
            Sodium.ensureReady()
            var publicKey = [UInt8](repeating: 0, count: keyCount)
            _ = crypto_scalarmult_base(&publicKey, seed)
            self.publicKey = publicKey
            self.secret = SecretBytes(seed)
        }

        /// An Ed25519 identity key's X25519 form (`crypto_sign_ed25519_sk_to_curve25519`).
        public init(identity: Ed25519.SigningKey) {
            Sodium.ensureReady()
            var curve = [UInt8](repeating: 0, count: keyCount)
            identity.secret.withBytes { _ = crypto_sign_ed25519_sk_to_curve25519(&curve, $0) }
            var publicKey = [UInt8](repeating: 0, count: keyCount)
            _ = crypto_scalarmult_base(&publicKey, curve)
            self.publicKey = publicKey
            self.secret = SecretBytes(curve)
            curve.withUnsafeMutableBytes { sodium_memzero($0.baseAddress, $0.count) }
        }

        /// The private key, for storing the pair.
        public var seed: [UInt8] { secret.withBytes { $0 } }

        /// `DH(self, peer)`; an all-zero result (a low-order peer key) is an error.
        public func sharedSecret(with peer: [UInt8]) throws(CryptoError) -> [UInt8] {
            guard peer.count == keyCount else { throw .badLength(what: "X25519 public key", expected: keyCount, found: peer.count) }
            var out = [UInt8](repeating: 0, count: keyCount)
            let status = out.withUnsafeMutableBytes { o in scalarmult(peer, into: o) }
            guard status == 0 else { throw .badKey("the X25519 shared secret is all zero (a low-order public key)") }
            return out
        }

        func scalarmult(_ peer: [UInt8], into out: UnsafeMutableRawBufferPointer) -> Int32 {
            guard peer.count == keyCount, out.count >= keyCount else { return -1 }
            return secret.withBytes { s in crypto_scalarmult(out.baseAddress!.assumingMemoryBound(to: UInt8.self), s, peer) }
        }

        public func sharedSecret(with peer: [UInt8], into out: UnsafeMutableRawBufferPointer) throws(CryptoError) {
            guard peer.count == keyCount else { throw .badLength(what: "X25519 public key", expected: keyCount, found: peer.count) }
            guard scalarmult(peer, into: out) == 0 else { throw .badKey("the X25519 shared secret is all zero (a low-order public key)") }
        }
    }

    /// An Ed25519 public key's X25519 form (`crypto_sign_ed25519_pk_to_curve25519`).
    public static func publicKey(fromIdentity ed25519: [UInt8]) throws(CryptoError) -> [UInt8] {
        guard ed25519.count == Ed25519.publicKeyCount else {
            throw .badLength(what: "Ed25519 public key", expected: Ed25519.publicKeyCount, found: ed25519.count)
        }
        Sodium.ensureReady()
        var out = [UInt8](repeating: 0, count: keyCount)
        guard crypto_sign_ed25519_pk_to_curve25519(&out, ed25519) == 0 else { throw .badKey("not a valid Ed25519 public key") }
        return out
    }
}
