public import LabCrypto

/// Sender keys for group channels (docs/chat.md): each (channel, sender device) has a
/// chain key, an iteration and an Ed25519 signing key. The sender's side encrypts; a
/// `SenderKeyReceiver` per sender device decrypts.
public struct SenderKeyChain: Sendable, Codable {
    public static let version: UInt8 = 0x03
    public let channelID: String
    var chainKey: SecretKey32
    public private(set) var iteration: UInt32
    let signing: Ed25519.SigningKey

    public init(channelID: String, chainKey: [UInt8], signingSeed: [UInt8], iteration: UInt32 = 0) throws(ChatCryptoError) {
        self.channelID = channelID
        do {
            self.chainKey = try SecretKey32(bytes: chainKey)
            signing = try Ed25519.SigningKey(seed: signingSeed)
        } catch { throw .key(error) }
        self.iteration = iteration
    }

    /// What every member device needs to read this sender, sent inside pairwise sessions.
    public var distribution: SenderKeyDistribution {
        SenderKeyDistribution(iteration: iteration, chainKey: chainKey, signingPublicKey: signing.publicKey)
    }

    /// `body || SIGN(body)` with `body = 0x03 || iteration || AEAD(…, ad = channel id)`.
    public mutating func encrypt(_ plaintext: [UInt8]) -> [UInt8] { encrypt(plaintext) { _ in } }

    /// The same, showing `messageSeed` the message's seed (`seed_i`; the vectors publish it).
    mutating func encrypt(_ plaintext: [UInt8], messageSeed observe: (UnsafeRawBufferPointer) -> Void) -> [UInt8] {
        var wire = [UInt8]()
        wire.reserveCapacity(5 + plaintext.count + XChaCha20Poly1305.tagCount + Ed25519.signatureCount)
        wire.append(Self.version)
        wire.appendUInt32(iteration)
        wire += repeatElement(0, count: plaintext.count + XChaCha20Poly1305.tagCount)
        var chain = chainKey
        chainKey = SenderKeyChain.placeholder  // keep `chain` uniquely referenced while it advances in place
        withUnsafeTemporaryAllocation(byteCount: 32, alignment: 8) { seed in
            defer { seed.initializeMemory(as: UInt8.self, repeating: 0) }
            RatchetSession.step(&chain, messageKey: seed)
            observe(UnsafeRawBufferPointer(seed))
            withMessageKey(UnsafeRawBufferPointer(seed), info: ProfileInfo.group) { keyNonce in
                Array(channelID.utf8).withUnsafeBytes { ad in
                    wire.withUnsafeMutableBytes { w in
                        plaintext.withUnsafeBytes { p in
                            XChaCha20Poly1305.seal(p, keyAndNonce: keyNonce, ad: ad, into: UnsafeMutableRawBufferPointer(rebasing: w[5...]))
                        }
                    }
                }
            }
        }
        chainKey = chain
        iteration += 1
        wire += signing.sign(wire)
        return wire
    }

    static let placeholder = SecretKey32.zero
}

/// The distribution message: `0x04 || iteration (u32) || chain key (32) || signing public key (32)`.
public struct SenderKeyDistribution: Sendable, Equatable, Codable {
    public static let kind: UInt8 = 0x04
    public static let byteCount = 69
    public var iteration: UInt32
    public var chainKey: SecretKey32
    public var signingPublicKey: [UInt8]

    public var bytes: [UInt8] {
        var out: [UInt8] = [Self.kind]
        out.appendUInt32(iteration)
        out += chainKey.bytes
        out += signingPublicKey
        return out
    }

    public init(iteration: UInt32, chainKey: SecretKey32, signingPublicKey: [UInt8]) {
        self.iteration = iteration
        self.chainKey = chainKey
        self.signingPublicKey = signingPublicKey
    }

    public init(bytes: [UInt8]) throws(ChatCryptoError) {
        guard bytes.count == Self.byteCount, bytes[0] == Self.kind else {
            throw .malformed("a sender key distribution is \(Self.byteCount) bytes starting 0x04")
        }
        iteration = bytes.uint32(at: 1)
        chainKey = bytes.withUnsafeBytes { SecretKey32(bytes: UnsafeRawBufferPointer(rebasing: $0[5..<37])) }
        signingPublicKey = Array(bytes[37..<69])
    }
}
