import LabKernel

/// Keys as stored values (a device's key store on disk): each by its 32-byte seed or
/// secret in hex. Whoever stores them must protect the file; decoding re-derives the rest.
extension SecretKey32: Codable {
    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard let bytes = [UInt8](hex: text), bytes.count == Self.byteCount else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "a secret key is 32 bytes of hex"))
        }
        self = bytes.withUnsafeBytes { SecretKey32(bytes: $0) }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(bytes.hexString)
    }
}

/// A key determined by a 32-byte seed: stored as its seed, re-derived when read.
public protocol SeedDerivedKey: Codable {
    init(seed: [UInt8]) throws(CryptoError)
    var seed: [UInt8] { get }
}

extension SeedDerivedKey {
    public init(from decoder: any Decoder) throws {
        let key = try decoder.singleValueContainer().decode(SecretKey32.self)
        do { self = try Self(seed: key.bytes) } catch {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "\(error)"))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(try SecretKey32(bytes: seed))
    }
}

extension X25519.KeyPair: SeedDerivedKey {}
extension Ed25519.SigningKey: SeedDerivedKey {}
