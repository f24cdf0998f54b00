import LabKernel

/// `byHour`: 24 relative weights shaping a rate over the day, one per hour from 00:00
/// (empty: flat), as chat, agent chats and both bridges take them. Arrivals are drawn at
/// the busiest hour's rate and thinned by `keep`, so the day's average stays the rate given.
enum HourWeights {
    static func decode<Key: CodingKey>(_ c: KeyedDecodingContainer<Key>, key: Key) throws -> [Double] {
        let weights = try c.decodeIfPresent([Double].self, forKey: key) ?? []
        guard weights.isEmpty || (weights.count == 24 && weights.allSatisfy { $0 >= 0 } && weights.contains { $0 > 0 }) else {
            throw DecodingError.dataCorrupted(.init(codingPath: c.codingPath + [key],
                                                    debugDescription: "24 weights, one per hour from 00:00, none negative and not all zero"))
        }
        return weights
    }

    /// The rate at the busiest hour, for an average of `rate`.
    static func peak(_ rate: Double, _ weights: [Double]) -> Double {
        guard !weights.isEmpty else { return rate }
        return rate * weights.max()! / (weights.reduce(0, +) / 24)
    }

    /// The chance of keeping a draw made at the peak rate during `hour`.
    static func keep(_ weights: [Double], hour: Int) -> Double { weights.isEmpty ? 1 : weights[hour] / weights.max()! }

    /// The hour of the day (0–23) at `now`, in a run that starts at `startAt`.
    static func hour(at now: Instant, startAt: TimeSpan) -> Int {
        Int(((startAt.nanoseconds + now.nanoseconds) / 3_600_000_000_000) % 24)
    }

    /// The wait until the next arrival of a Poisson process whose arrivals come `mean`
    /// seconds apart on average, to the millisecond (at least one).
    static func gap(mean: Double, using stream: inout SeededGenerator) -> TimeSpan {
        .milliseconds(max(1, Int64(Distribution.exponential(mean: mean).sample(using: &stream) * 1_000)))
    }
}
