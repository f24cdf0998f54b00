public import LabCrypto

/// X3DH key agreement (docs/chat.md): the initiator combines its identity and a fresh
/// ephemeral key with the responder's bundle; the responder recomputes the same secret
/// from the initiator's identity and ephemeral public keys.
public enum X3DH {
    public struct Agreement: Sendable {
        /// `SK`, the Double Ratchet's first root key.
        public let sharedKey: SecretKey32
        /// `AD = IK_A.pub || IK_B.pub` (Ed25519, 64 bytes).
        public let associatedData: [UInt8]
    }

    /// The initiator's side. Refuses a bundle whose signed pre-key signature fails.
    public static func initiate(identity: IdentityKey, ephemeral: X25519.KeyPair, bundle: PreKeyBundle) throws(ChatCryptoError) -> Agreement {
        guard Ed25519.verify(signature: bundle.signedPreKeySignature, message: bundle.signedPreKey, publicKey: bundle.identityKey) else {
            throw .badPreKeySignature
        }
        var dh = try initiatorSecrets(identity: identity, ephemeral: ephemeral, bundle: bundle).flatMap { $0 }
        return derive(&dh, initiator: identity.publicKey, responder: bundle.identityKey)
    }

    /// `DH1, DH2, DH3[, DH4]` of the initiator, in order (the vectors publish them).
    static func initiatorSecrets(identity: IdentityKey, ephemeral: X25519.KeyPair, bundle: PreKeyBundle) throws(ChatCryptoError) -> [[UInt8]] {
        do {
            let remoteIdentity = try X25519.publicKey(fromIdentity: bundle.identityKey)
            var dh = [try identity.agreement.sharedSecret(with: bundle.signedPreKey), try ephemeral.sharedSecret(with: remoteIdentity),
                      try ephemeral.sharedSecret(with: bundle.signedPreKey)]
            if let oneTime = bundle.oneTimePreKey { dh.append(try ephemeral.sharedSecret(with: oneTime.key)) }
            return dh
        } catch { throw .key(error) }
    }

    /// The responder's side, with the pre-keys the initiator used.
    public static func respond(identity: IdentityKey, signedPreKey: PreKey, oneTimePreKey: PreKey?, initiatorIdentity: [UInt8],
                               initiatorEphemeral: [UInt8]) throws(ChatCryptoError) -> Agreement {
        do {
            let remoteIdentity = try X25519.publicKey(fromIdentity: initiatorIdentity)
            var dh = try signedPreKey.pair.sharedSecret(with: remoteIdentity)
            dh += try identity.agreement.sharedSecret(with: initiatorEphemeral)
            dh += try signedPreKey.pair.sharedSecret(with: initiatorEphemeral)
            if let oneTimePreKey { dh += try oneTimePreKey.pair.sharedSecret(with: initiatorEphemeral) }
            return derive(&dh, initiator: initiatorIdentity, responder: identity.publicKey)
        } catch { throw .key(error) }
    }

    /// Derives `SK` and zeroes the DH outputs and the HKDF input.
    static func derive(_ dh: inout [UInt8], initiator: [UInt8], responder: [UInt8]) -> Agreement {
        var ikm = [UInt8](repeating: 0xFF, count: 32) + dh
        defer {
            ikm.zeroize()
            dh.zeroize()
        }
        let key = (try? SecretKey32 { (out: UnsafeMutableRawBufferPointer) throws(CryptoError) in
            ikm.withUnsafeBytes { i in
                ProfileInfo.x3dh.withUnsafeBytes { HKDF.derive(salt: UnsafeRawBufferPointer(start: nil, count: 0), ikm: i, info: $0, into: out) }
            }
        })!
        return Agreement(sharedKey: key, associatedData: initiator + responder)
    }
}
