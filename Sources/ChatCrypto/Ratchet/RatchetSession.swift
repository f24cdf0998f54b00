public import LabCrypto

/// The Double Ratchet of a DM session between two devices (docs/chat.md).
///
/// Theory of operation. X3DH gives both sides `SK` and `AD`. The initiator starts with a
/// sending chain from `KDF_RK(SK, DH(its first ratchet key, SPK_B))`; the responder uses
/// its signed pre-key as its first ratchet key and cannot send until it has received.
/// Every message advances the sending chain (`KDF_CK`) and carries the sender's ratchet
/// public key with `PN` and `N`. A header with a new ratchet key makes the receiver derive
/// a new receiving chain at once and, at its next send, a new ratchet key and sending
/// chain (the seed of that key is drawn then, so one seeded stream reproduces a run; the
/// result equals the specification's eager step). Message keys of skipped messages are
/// kept, at most `maxSkippedKeys`, and used once. Decryption works on a copy of the state
/// and keeps it only when the message authenticates, so a forged or replayed message
/// changes nothing.
public struct RatchetSession: Sendable, Codable {
    public static let version: UInt8 = 0x02
    public static let headerCount = 40
    public static let maxSkippedKeys = 1_000

    struct SkippedKey: Hashable, Sendable, Codable {
        var ratchet: [UInt8]
        var number: UInt32
    }

    let associatedData: [UInt8]
    var rootKey: SecretKey32
    var sendingRatchet: X25519.KeyPair
    var remoteRatchet: [UInt8]?
    var sendingChain: SecretKey32?
    var receivingChain: SecretKey32?
    var sendCount: UInt32 = 0
    var receiveCount: UInt32 = 0
    var previousCount: UInt32 = 0
    /// A new ratchet key arrived since the last send: the next send turns the ratchet.
    var turnPending = false
    var skipped: [SkippedKey: SecretKey32] = [:]
    /// Skipped keys in the order they were stored, for dropping the oldest.
    var skippedOrder: [SkippedKey] = []

    /// The initiator's session after X3DH.
    public init(initiator agreement: X3DH.Agreement, remoteSignedPreKey: [UInt8], firstRatchet: X25519.KeyPair) throws(ChatCryptoError) {
        associatedData = agreement.associatedData
        rootKey = agreement.sharedKey
        sendingRatchet = firstRatchet
        remoteRatchet = remoteSignedPreKey
        sendingChain = try Self.turn(&rootKey, ours: firstRatchet, theirs: remoteSignedPreKey)
    }

    /// The responder's session after X3DH: its signed pre-key is its first ratchet key.
    public init(responder agreement: X3DH.Agreement, signedPreKey: PreKey) {
        associatedData = agreement.associatedData
        rootKey = agreement.sharedKey
        sendingRatchet = signedPreKey.pair
    }

    public var canSend: Bool { sendingChain != nil || turnPending }

    /// `KDF_RK(rk, DH(ours, theirs))`: updates the root key, returns the new chain key.
    static func turn(_ rootKey: inout SecretKey32, ours: X25519.KeyPair, theirs: [UInt8]) throws(ChatCryptoError) -> SecretKey32 {
        var dh: [UInt8]
        do { dh = try ours.sharedSecret(with: theirs) } catch { throw .key(error) }
        defer { dh.zeroize() }
        return withUnsafeTemporaryAllocation(byteCount: 64, alignment: 8) { out in
            defer { out.initializeMemory(as: UInt8.self, repeating: 0) }
            rootKey.withBytes { rk in
                dh.withUnsafeBytes { d in ProfileInfo.ratchet.withUnsafeBytes { HKDF.derive(salt: rk, ikm: d, info: $0, into: out) } }
            }
            rootKey.update { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(out)[0..<32])) }
            return SecretKey32(bytes: UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(out)[32..<64]))
        }
    }

    /// `KDF_CK`: writes the message key to `messageKey` and advances `chain`.
    @inline(__always)
    static func step(_ chain: inout SecretKey32, messageKey: UnsafeMutableRawBufferPointer) {
        chain.withBytes { HMACSHA256.mac(key: $0, byte: 0x01, into: messageKey) }
        chain.update { ck in
            withUnsafeTemporaryAllocation(byteCount: 32, alignment: 8) { next in
                HMACSHA256.mac(key: UnsafeRawBufferPointer(ck), byte: 0x02, into: next)
                ck.copyMemory(from: UnsafeRawBufferPointer(next))
                next.initializeMemory(as: UInt8.self, repeating: 0)
            }
        }
    }
}
