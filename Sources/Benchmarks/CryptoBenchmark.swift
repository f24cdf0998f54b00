internal import CSodium
public import ChatCrypto
public import LabCrypto

/// `fleetlab bench crypto`: each operation of the profile beside the bare libsodium calls
/// it makes, measured in the same run (docs/chat.md). The bare loops call exactly the
/// same primitives on preallocated buffers, so the ratio is what our layers add: value
/// types, copies, checks, zeroing.
public enum CryptoBenchmark {
    public struct Figure: Sendable {
        public var name: String
        public var operations: Int
        /// Seconds for `operations` through our layers, and through the bare calls.
        public var ours: Double
        public var bare: Double

        public var oursPerSecond: Double { Double(operations) / ours }
        public var barePerSecond: Double { Double(operations) / bare }
        /// Our time over the bare time, minus one: 0.30 is 30 % more.
        public var overhead: Double { ours / bare - 1 }
    }

    /// Runs every pair `rounds` times, alternating ours and bare, and keeps each side's
    /// best round (the least disturbed by the machine).
    public static func run(operations: Int, messageBytes: Int, rounds: Int, clock: () -> Double) throws(ChatCryptoError) -> [Figure] {
        var fixture = try Fixture(messageBytes: messageBytes)
        let pairs: [(String, (inout Fixture, Int) throws(ChatCryptoError) -> Void, (inout Fixture, Int) -> Void)] = [
            ("X3DH handshake (both sides)", { (f: inout Fixture, n: Int) throws(ChatCryptoError) in try f.handshakes(n) }, { f, n in f.bareHandshakes(n) }),
            ("ratchet encrypt + decrypt", { (f: inout Fixture, n: Int) throws(ChatCryptoError) in try f.ratchetMessages(n) }, { f, n in f.bareRatchetMessages(n) }),
            ("group encrypt + sign", { (f: inout Fixture, n: Int) throws(ChatCryptoError) in f.groupSends(n) }, { f, n in f.bareGroupSends(n) }),
            ("group verify + decrypt", { (f: inout Fixture, n: Int) throws(ChatCryptoError) in try f.groupReceives(n) }, { f, n in f.bareGroupReceives(n) }),
        ]
        var figures: [Figure] = []
        for (name, ours, bare) in pairs {
            let count = name.hasPrefix("X3DH") ? max(1, operations / 10) : operations
            var best = (ours: Double.infinity, bare: Double.infinity)
            for _ in 0..<rounds {
                try fixture.prepare(name: name, count: count)
                var start = clock()
                try ours(&fixture, count)
                best.ours = min(best.ours, clock() - start)
                start = clock()
                bare(&fixture, count)
                best.bare = min(best.bare, clock() - start)
            }
            figures.append(Figure(name: name, operations: count, ours: best.ours, bare: best.bare))
        }
        return figures
    }
}
