internal import CSodium

/// Ed25519 signatures (libsodium's `crypto_sign_*`), as orch8 signs manifests and
/// sequences: detached 64-byte signatures over the exact bytes.
public enum Ed25519 {
    public static let publicKeyCount = 32
    public static let seedCount = 32
    public static let signatureCount = 64

    /// A signing key: the 32-byte seed it was derived from determines it completely, so a
    /// seeded generator gives reproducible keys in simulation.
    public struct SigningKey: Sendable {
        public let publicKey: [UInt8]
        let secret: SecretBytes

        public init(seed: [UInt8]) throws(CryptoError) {
            guard seed.count == seedCount else { throw .badLength(what: "Ed25519 seed", expected: seedCount, found: seed.count) }
            Sodium.ensureReady()
            var publicKey = [UInt8](repeating: 0, count: publicKeyCount)
            var secret = [UInt8](repeating: 0, count: Int(crypto_sign_SECRETKEYBYTES))
            _ = crypto_sign_seed_keypair(&publicKey, &secret, seed)
            self.publicKey = publicKey
            self.secret = SecretBytes(secret)
            secret.withUnsafeMutableBytes { sodium_memzero($0.baseAddress, $0.count) }
        }

        /// The seed, for storing the key (a server's key file or database row).
        public var seed: [UInt8] { secret.withBytes { Array($0.prefix(seedCount)) } }

        public func sign(_ message: [UInt8]) -> [UInt8] {
            var signature = [UInt8](repeating: 0, count: signatureCount)
            secret.withBytes { key in
                message.withUnsafeBufferPointer { m in
                    _ = crypto_sign_detached(&signature, nil, m.baseAddress, UInt64(m.count), key)
                }
            }
            return signature
        }
    }

    /// Whether `signature` is `publicKey`'s signature of `message`.
    public static func verify(signature: [UInt8], message: [UInt8], publicKey: [UInt8]) -> Bool {
        guard signature.count == signatureCount, publicKey.count == publicKeyCount else { return false }
        Sodium.ensureReady()
        return message.withUnsafeBufferPointer { m in
            crypto_sign_verify_detached(signature, m.baseAddress, UInt64(m.count), publicKey) == 0
        }
    }
}

/// What went wrong with key material or a signature.
public enum CryptoError: Error, Equatable, Sendable, CustomStringConvertible {
    case badLength(what: String, expected: Int, found: Int)
    case badSignature(String)
    case badEncoding(String)
    case badKey(String)

    public var description: String {
        switch self {
        case .badLength(let what, let expected, let found): return "\(what) must be \(expected) bytes, found \(found)"
        case .badSignature(let what): return "bad signature: \(what)"
        case .badEncoding(let what): return "bad encoding: \(what)"
        case .badKey(let what): return "bad key: \(what)"
        }
    }
}
