/// A position in the tree of random streams that hangs off one root seed.
///
/// Every device, server and workload derives its own stream from the root by labels
/// (`root.child(.device).child(population).child(index)`), never by drawing from a
/// shared generator. Adding a device therefore changes no other stream, and a stream
/// can be rebuilt from its labels alone when a single device is replayed.
public struct StreamSeed: Hashable, Sendable, CustomStringConvertible {
    public let value: UInt64

    public init(_ value: UInt64) { self.value = value }

    /// The stream below this one for `label`.
    @inlinable
    public func child(_ label: UInt64) -> StreamSeed {
        StreamSeed(SplitMix64.mix(value ^ SplitMix64.mix(label &+ 0x632B_E59B_D9B4_E019)))
    }

    /// The stream below this one for a textual label (a population or server name).
    public func child(_ label: String) -> StreamSeed { child(StableHash.fnv1a64(label)) }

    /// The stream below this one for a well-known role.
    public func child(_ role: StreamRole) -> StreamSeed { child(role.rawValue) }

    public func generator() -> SeededGenerator { SeededGenerator(seed: value) }

    public var description: String { String(value, radix: 16) }
}

/// Roles that split the root seed at its first level.
public enum StreamRole: UInt64, Sendable {
    case device = 1
    case server = 2
    case network = 3
    case workload = 4
    case fault = 5
    case recorder = 6
}

/// Hashes that stay the same across processes and builds (Swift's `Hasher` is seeded
/// per process and must never reach results).
public enum StableHash {
    public static func fnv1a64(_ text: String) -> UInt64 {
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        for byte in text.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01B3
        }
        return hash
    }
}
