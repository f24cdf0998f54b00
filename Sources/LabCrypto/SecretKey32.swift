internal import CSodium

/// A 32-byte secret as a value: copy-on-write storage that is zeroed with
/// `sodium_memzero` when the last copy goes, and updated in place while it has one owner,
/// so advancing a chain key costs no allocation.
public struct SecretKey32: Sendable {
    final class Storage: @unchecked Sendable {
        var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)

        init() {}

        deinit { withUnsafeMutableBytes(of: &words) { sodium_memzero($0.baseAddress, $0.count) } }
    }

    var storage: Storage

    public static let byteCount = 32

    /// Fills a new key with `body`.
    public init(_ body: (UnsafeMutableRawBufferPointer) throws(CryptoError) -> Void) throws(CryptoError) {
        storage = Storage()
        try withUnsafeMutableBytes(of: &storage.words) { (raw: UnsafeMutableRawBufferPointer) throws(CryptoError) in try body(raw) }
    }

    public init(bytes: UnsafeRawBufferPointer) {
        precondition(bytes.count == Self.byteCount)
        storage = Storage()
        withUnsafeMutableBytes(of: &storage.words) { $0.copyMemory(from: bytes) }
    }

    public init(bytes: [UInt8]) throws(CryptoError) {
        guard bytes.count == Self.byteCount else { throw .badLength(what: "key", expected: Self.byteCount, found: bytes.count) }
        self = bytes.withUnsafeBytes { SecretKey32(bytes: $0) }
    }

    public func withBytes<T>(_ body: (UnsafeRawBufferPointer) throws -> T) rethrows -> T {
        try withUnsafeBytes(of: &storage.words) { try body($0) }
    }

    /// Rewrites the key in place (after copying it away from other owners).
    public mutating func update(_ body: (UnsafeMutableRawBufferPointer) -> Void) {
        if !isKnownUniquelyReferenced(&storage) {
            let copy = Storage()
            copy.words = storage.words
            storage = copy
        }
        withUnsafeMutableBytes(of: &storage.words) { body($0) }
    }

    /// The bytes, for serialising a session or a test vector.
    public var bytes: [UInt8] { withBytes { Array($0) } }
}

extension SecretKey32: Equatable {
    public static func == (a: SecretKey32, b: SecretKey32) -> Bool {
        a.withBytes { x in b.withBytes { y in sodium_memcmp(x.baseAddress, y.baseAddress, byteCount) == 0 } }
    }
}
