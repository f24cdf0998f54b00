import ChatCrypto
import LabCrypto
import LabKernel

/// The one-time pre-keys a device has uploaded and not yet seen used.
///
/// Each is kept as its id, its public key as a `Bytes32` and its private seed as a
/// `SecretKey32` (zeroed when the last copy goes): about 100 bytes a key, where a `PreKey`
/// under its base64 name took about 330 in four allocations. A device holds 20 to 40 of
/// them for as long as it lives, and a fleet holds them for every device. A message that
/// uses one looks it up by its public key once, when its session starts, so a scan is
/// enough; the `PreKey` X3DH needs is derived again from the seed then.
public struct OneTimePreKeys: Sendable {
    struct Entry: Sendable {
        let id: UInt32
        let publicKey: Bytes32
        let seed: SecretKey32
    }

    private var entries: [Entry] = []

    public init() {}

    public var count: Int { entries.count }

    /// A new key from its 32-byte seed; returns its public key.
    mutating func add(id: UInt32, seed: [UInt8]) throws(ChatCryptoError) -> [UInt8] {
        let key = try PreKey(id: id, seed: seed)
        let secret: SecretKey32
        do { secret = try SecretKey32(bytes: seed) } catch { throw .key(error) }
        entries.append(Entry(id: id, publicKey: Bytes32(key.publicKey)!, seed: secret))
        return key.publicKey
    }

    /// The key whose public key is `publicKey`, if the device still has it.
    func key(publicKey: [UInt8]) throws(ChatCryptoError) -> PreKey? {
        guard let wanted = Bytes32(publicKey), let entry = entries.first(where: { $0.publicKey == wanted }) else { return nil }
        return try PreKey(id: entry.id, seed: entry.seed.bytes)
    }

    /// Used once, then gone.
    mutating func remove(publicKey: [UInt8]) {
        guard let wanted = Bytes32(publicKey) else { return }
        entries.removeAll { $0.publicKey == wanted }
    }
}

/// Stored as the list of pre-keys (each its id and seed); decoding derives the public keys.
extension OneTimePreKeys: Codable {
    public init(from decoder: any Decoder) throws {
        for key in try decoder.singleValueContainer().decode([PreKey].self) {
            _ = try add(id: key.id, seed: key.pair.seed)
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(try entries.map { entry throws(ChatCryptoError) in try PreKey(id: entry.id, seed: entry.seed.bytes) })
    }
}
