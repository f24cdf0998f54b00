internal import CSodium

/// SHA-256 (libsodium's `crypto_hash_sha256`).
public enum SHA256 {
    public static let byteCount = 32

    public static func hash(_ bytes: [UInt8]) -> [UInt8] {
        Sodium.ensureReady()
        var digest = [UInt8](repeating: 0, count: byteCount)
        bytes.withUnsafeBufferPointer { input in
            _ = crypto_hash_sha256(&digest, input.baseAddress, UInt64(input.count))
        }
        return digest
    }

    public static func hash(_ text: String) -> [UInt8] { hash(Array(text.utf8)) }
}
