import LabCrypto

/// Reads one sender device's messages in one channel.
///
/// Theory of operation. The receiver starts from the sender's distribution (chain key at
/// some iteration). A message's signature is verified before anything else; then its
/// iteration selects the key: the current chain position, a stored skipped key, or a
/// position ahead (the keys in between are stored, at most `maxSkippedKeys`, the oldest
/// dropped; a jump over `maxForwardJump` is refused). Each key decrypts once. State changes
/// only when a message authenticates.
public struct SenderKeyReceiver: Sendable, Codable {
    public static let maxSkippedKeys = 2_000
    public static let maxForwardJump = 25_000

    public let channelID: String
    let signingPublicKey: [UInt8]
    var chainKey: SecretKey32
    public private(set) var iteration: UInt32
    /// The iteration the distribution started at: anything earlier was sent before this
    /// device had the key.
    public let firstIteration: UInt32
    var skipped: [UInt32: SecretKey32] = [:]
    var skippedOrder: [UInt32] = []

    public init(channelID: String, distribution: SenderKeyDistribution) {
        self.channelID = channelID
        signingPublicKey = distribution.signingPublicKey
        chainKey = distribution.chainKey
        iteration = distribution.iteration
        firstIteration = distribution.iteration
    }

    enum CodingKeys: String, CodingKey { case channelID, signingPublicKey, chainKey, iteration, firstIteration, skipped, skippedOrder }

    /// Receivers stored before `firstIteration` existed start at their current position.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        channelID = try c.decode(String.self, forKey: .channelID)
        signingPublicKey = try c.decode([UInt8].self, forKey: .signingPublicKey)
        chainKey = try c.decode(SecretKey32.self, forKey: .chainKey)
        iteration = try c.decode(UInt32.self, forKey: .iteration)
        firstIteration = try c.decodeIfPresent(UInt32.self, forKey: .firstIteration) ?? iteration
        skipped = try c.decode([UInt32: SecretKey32].self, forKey: .skipped)
        skippedOrder = try c.decode([UInt32].self, forKey: .skippedOrder)
    }

    public mutating func decrypt(_ wire: [UInt8]) throws(ChatCryptoError) -> [UInt8] {
        let minimum = 5 + XChaCha20Poly1305.tagCount + Ed25519.signatureCount
        guard wire.count >= minimum else { throw .malformed("a group message is at least \(minimum) bytes, found \(wire.count)") }
        guard wire[0] == SenderKeyChain.version else { throw .malformed("version byte \(wire[0]), expected 3") }
        let bodyCount = wire.count - Ed25519.signatureCount
        guard Ed25519.verify(signature: Array(wire[bodyCount...]), message: Array(wire[..<bodyCount]), publicKey: signingPublicKey) else {
            throw .badMessageSignature
        }
        let target = wire.uint32(at: 1)
        if let key = skipped[target] {
            let plaintext = try open(wire, bodyCount: bodyCount, seed: key)
            skipped[target] = nil
            skippedOrder.removeAll { $0 == target }
            return plaintext
        }
        guard target >= firstIteration else { throw .predatesKey(iteration: target) }
        guard target >= iteration else { throw .replay(iteration: target) }
        guard target - iteration <= UInt32(Self.maxForwardJump) else {
            throw .gapTooLarge(skipped: Int(target - iteration), limit: Self.maxForwardJump)
        }
        var next = self
        var chain = next.chainKey
        next.chainKey = SenderKeyChain.placeholder
        var key = SecretKey32.zero
        while next.iteration <= target {
            let seed = withUnsafeTemporaryAllocation(byteCount: 32, alignment: 8) { seed in
                defer { seed.initializeMemory(as: UInt8.self, repeating: 0) }
                RatchetSession.step(&chain, messageKey: seed)
                return SecretKey32(bytes: UnsafeRawBufferPointer(seed))
            }
            if next.iteration == target {
                key = seed
            } else if target - next.iteration <= UInt32(Self.maxSkippedKeys) {
                next.skipped[next.iteration] = seed
                next.skippedOrder.append(next.iteration)
            }
            next.iteration += 1
        }
        next.chainKey = chain
        if next.skippedOrder.count > Self.maxSkippedKeys {
            let drop = next.skippedOrder.count - Self.maxSkippedKeys
            for old in next.skippedOrder.prefix(drop) { next.skipped[old] = nil }
            next.skippedOrder.removeFirst(drop)
        }
        let plaintext = try open(wire, bodyCount: bodyCount, seed: key)
        self = next
        return plaintext
    }

    func open(_ wire: [UInt8], bodyCount: Int, seed: SecretKey32) throws(ChatCryptoError) -> [UInt8] {
        var plaintext = [UInt8](repeating: 0, count: bodyCount - 5 - XChaCha20Poly1305.tagCount)
        let ok = seed.withBytes { s in
            withMessageKey(s, info: ProfileInfo.group) { keyNonce in
                Array(channelID.utf8).withUnsafeBytes { ad in
                    wire.withUnsafeBytes { w in
                        plaintext.withUnsafeMutableBytes { p in
                            XChaCha20Poly1305.open(UnsafeRawBufferPointer(rebasing: w[5..<bodyCount]), keyAndNonce: keyNonce, ad: ad, into: p)
                        }
                    }
                }
            }
        }
        guard ok else { throw .authenticationFailed }
        return plaintext
    }
}

extension SecretKey32 {
    static let zero: SecretKey32 = [UInt8](repeating: 0, count: 32).withUnsafeBytes { SecretKey32(bytes: $0) }
}
