import LabKernel

/// Shares of users owning 1, 2 or 3 of something (`{1: 60%, 2: 30%, 3: 10%}`), adding up
/// to 100 %: the AI bridge's phones per user, the desktop bridge's phones per desktop.
enum CountShares {
    static func decode<Key: CodingKey>(_ c: KeyedDecodingContainer<Key>, key: Key, noun: String, defaults: [Ratio]) throws -> [Ratio] {
        guard let shares = try c.decodeIfPresent([String: Ratio].self, forKey: key) else { return defaults }
        func fail(_ message: String) -> DecodingError { .dataCorrupted(.init(codingPath: c.codingPath + [key], debugDescription: message)) }
        guard Set(shares.keys).isSubset(of: ["1", "2", "3"]) else { throw fail("keys are 1, 2 and 3 (\(noun))") }
        let ordered = ["1", "2", "3"].map { shares[$0] ?? .zero }
        let total = ordered.reduce(0.0) { $0 + $1.fraction }
        guard abs(total - 1) < 1e-9 else { throw fail("shares add up to \(Int((total * 100).rounded()))%, not 100%") }
        return ordered
    }

    /// How many a user owns, for a draw in 0..<1.
    static func count(_ shares: [Ratio], draw: Double) -> Int {
        draw < shares[0].fraction ? 1 : draw < shares[0].fraction + shares[1].fraction ? 2 : 3
    }
}
