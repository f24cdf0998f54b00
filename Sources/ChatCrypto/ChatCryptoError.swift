public import LabCrypto

/// Everything that can go wrong decrypting or setting up a session. Peer misbehaviour is
/// a typed error, never a crash, and leaves the session as it was.
public enum ChatCryptoError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The bundle's signed pre-key is not signed by its identity key.
    case badPreKeySignature
    /// A group message whose signature does not verify under the sender's key.
    case badMessageSignature
    /// The ciphertext, header or associated data do not authenticate.
    case authenticationFailed
    /// A message key that was already used (or never existed): a replay.
    case replay(iteration: UInt32)
    /// A group message sent before this device received the sender's key (it joined, or
    /// was added, later): unreadable here by design, not an attack or a fault.
    case predatesKey(iteration: UInt32)
    /// More skipped keys than the profile allows.
    case gapTooLarge(skipped: Int, limit: Int)
    /// Input shorter than its fixed fields, or with a wrong version byte.
    case malformed(String)
    /// The session cannot send yet: a responder sends only after its first received message.
    case cannotSendYet
    case key(CryptoError)

    public var description: String {
        switch self {
        case .badPreKeySignature: return "the signed pre-key's signature does not verify under the identity key"
        case .badMessageSignature: return "the message signature does not verify under the sender's key"
        case .authenticationFailed: return "the message does not authenticate (wrong key, or altered in transit)"
        case .replay(let n): return "message \(n) was already decrypted, or its key is gone"
        case .predatesKey(let n): return "message \(n) was sent before this device received the sender's key"
        case .gapTooLarge(let skipped, let limit): return "the message skips \(skipped) keys; at most \(limit) are allowed"
        case .malformed(let what): return "malformed: \(what)"
        case .cannotSendYet: return "this session has not received a message yet, so it cannot send"
        case .key(let error): return error.description
        }
    }
}

extension [UInt8] {
    /// A big-endian u32 at `offset` (the caller checked the length).
    func uint32(at offset: Int) -> UInt32 {
        UInt32(self[offset]) << 24 | UInt32(self[offset + 1]) << 16 | UInt32(self[offset + 2]) << 8 | UInt32(self[offset + 3])
    }

    /// Overwrites a secret before the array is released.
    mutating func zeroize() {
        withUnsafeMutableBytes { _ = $0.initializeMemory(as: UInt8.self, repeating: 0) }
    }

    mutating func appendUInt32(_ value: UInt32) {
        append(UInt8(truncatingIfNeeded: value >> 24))
        append(UInt8(truncatingIfNeeded: value >> 16))
        append(UInt8(truncatingIfNeeded: value >> 8))
        append(UInt8(truncatingIfNeeded: value))
    }
}

/// HKDF info strings of the profile.
package enum ProfileInfo {
    package static let x3dh = Array("fleetlab X3DH v1".utf8)
    static let ratchet = Array("fleetlab Ratchet v1".utf8)
    package static let message = Array("fleetlab Message v1".utf8)
    package static let group = Array("fleetlab Group v1".utf8)
}

/// `key || nonce = HKDF(salt = 32 zero bytes, ikm, info, 56)`, on the stack.
@inline(__always)
func withMessageKey<T>(_ ikm: UnsafeRawBufferPointer, info: [UInt8], _ body: (UnsafeRawBufferPointer) -> T) -> T {
    withUnsafeTemporaryAllocation(byteCount: 56, alignment: 8) { scratch in
        defer { scratch.initializeMemory(as: UInt8.self, repeating: 0) }
        info.withUnsafeBytes { HKDF.derive(salt: UnsafeRawBufferPointer(start: nil, count: 0), ikm: ikm, info: $0, into: scratch) }
        return body(UnsafeRawBufferPointer(scratch))
    }
}
