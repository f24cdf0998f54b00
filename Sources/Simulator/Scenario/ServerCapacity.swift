public import LabKernel

/// A server's capacity model (`sync.server`, `chat.server`): a pool of workers, the time
/// each spends on one request, and how many requests may wait for a worker before the
/// server refuses more (503 with Retry-After).
public struct ServerCapacity: Sendable, Hashable {
    public var workers: Int
    /// Time a worker spends on one request (seconds).
    public var serviceTime: Distribution
    public var queueLimit: Int

    enum CodingKeys: String, CodingKey, CaseIterable { case workers, serviceTime, queueLimit }

    public init(workers: Int, serviceTime: Distribution, queueLimit: Int) {
        self.workers = workers
        self.serviceTime = serviceTime
        self.queueLimit = queueLimit
    }

    /// Reads the keys given over `defaults`.
    static func decode<K: CodingKey>(_ c: KeyedDecodingContainer<K>, key: K, defaults: ServerCapacity) throws -> ServerCapacity {
        guard c.contains(key) else { return defaults }
        let s = try c.nestedContainer(keyedBy: CodingKeys.self, forKey: key)
        var capacity = defaults
        capacity.workers = try s.decodeIfPresent(Int.self, forKey: .workers) ?? capacity.workers
        capacity.serviceTime = try s.decodeIfPresent(Distribution.self, forKey: .serviceTime) ?? capacity.serviceTime
        capacity.queueLimit = try s.decodeIfPresent(Int.self, forKey: .queueLimit) ?? capacity.queueLimit
        guard (1...10_000).contains(capacity.workers) else {
            throw DecodingError.dataCorrupted(.init(codingPath: s.codingPath + [CodingKeys.workers], debugDescription: "expected 1...10000 workers"))
        }
        guard (0...10_000_000).contains(capacity.queueLimit) else {
            throw DecodingError.dataCorrupted(.init(codingPath: s.codingPath + [CodingKeys.queueLimit], debugDescription: "expected 0...10000000"))
        }
        return capacity
    }
}
