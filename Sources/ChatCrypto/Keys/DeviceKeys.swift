public import LabCrypto

/// A device's long-term identity: an Ed25519 key that also does X25519 in its converted
/// form (docs/chat.md, "Device keys").
public struct IdentityKey: Sendable, Codable {
    public let signing: Ed25519.SigningKey
    public let agreement: X25519.KeyPair

    public init(seed: [UInt8]) throws(ChatCryptoError) {
        do { signing = try Ed25519.SigningKey(seed: seed) } catch { throw .key(error) }
        agreement = X25519.KeyPair(identity: signing)
    }

    public var publicKey: [UInt8] { signing.publicKey }

    public init(from decoder: any Decoder) throws {
        signing = try decoder.singleValueContainer().decode(Ed25519.SigningKey.self)
        agreement = X25519.KeyPair(identity: signing)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(signing)
    }
}

/// An X25519 pre-key: the signed one, or a one-time one with its id.
public struct PreKey: Sendable, Codable {
    public let id: UInt32
    public let pair: X25519.KeyPair

    public init(id: UInt32, seed: [UInt8]) throws(ChatCryptoError) {
        self.id = id
        do { pair = try X25519.KeyPair(seed: seed) } catch { throw .key(error) }
    }

    public var publicKey: [UInt8] { pair.publicKey }
}

/// What the server hands out for a device: identity, signed pre-key with its signature,
/// and at most one one-time pre-key.
public struct PreKeyBundle: Sendable, Equatable {
    public var identityKey: [UInt8]
    public var signedPreKey: [UInt8]
    public var signedPreKeySignature: [UInt8]
    public var oneTimePreKey: (id: UInt32, key: [UInt8])?

    public init(identityKey: [UInt8], signedPreKey: [UInt8], signedPreKeySignature: [UInt8], oneTimePreKey: (id: UInt32, key: [UInt8])?) {
        self.identityKey = identityKey
        self.signedPreKey = signedPreKey
        self.signedPreKeySignature = signedPreKeySignature
        self.oneTimePreKey = oneTimePreKey
    }

    /// The bundle of a device's own keys.
    public init(identity: IdentityKey, signedPreKey: PreKey, oneTimePreKey: PreKey?) {
        self.init(identityKey: identity.publicKey, signedPreKey: signedPreKey.publicKey,
                  signedPreKeySignature: identity.signing.sign(signedPreKey.publicKey),
                  oneTimePreKey: oneTimePreKey.map { ($0.id, $0.publicKey) })
    }

    public static func == (a: PreKeyBundle, b: PreKeyBundle) -> Bool {
        a.identityKey == b.identityKey && a.signedPreKey == b.signedPreKey && a.signedPreKeySignature == b.signedPreKeySignature
            && a.oneTimePreKey?.id == b.oneTimePreKey?.id && a.oneTimePreKey?.key == b.oneTimePreKey?.key
    }
}
