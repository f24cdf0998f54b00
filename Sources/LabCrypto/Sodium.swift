internal import CSodium

/// libsodium, initialised once before first use.
enum Sodium {
    static let ready: Bool = sodium_init() >= 0

    static func ensureReady() {
        precondition(ready, "libsodium failed to initialise")
    }
}

/// A secret that is zeroed with `sodium_memzero` when the last reference goes.
public final class SecretBytes: @unchecked Sendable {
    private var storage: [UInt8]

    public init(_ bytes: [UInt8]) { storage = bytes }

    public var count: Int { storage.count }

    /// Borrows the bytes; never copy them out into a longer-lived value.
    public func withBytes<T>(_ body: ([UInt8]) throws -> T) rethrows -> T { try body(storage) }

    deinit {
        storage.withUnsafeMutableBytes { sodium_memzero($0.baseAddress, $0.count) }
    }
}

/// Comparisons of secrets and MACs in constant time.
public enum ConstantTime {
    public static func equal(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        guard !a.isEmpty else { return true }
        return a.withUnsafeBytes { pa in b.withUnsafeBytes { pb in sodium_memcmp(pa.baseAddress, pb.baseAddress, a.count) == 0 } }
    }
}
