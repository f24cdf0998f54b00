/// A log-linear (HDR-style) histogram of non-negative integers.
///
/// Values below 2^p (p = `precisionBits`) get a bucket each; above that, every power of
/// two is split into 2^p equal sub-buckets, so any recorded value is known to within a
/// relative error of 2^-p (0.8 % at the default p = 7). Bucket boundaries depend only
/// on p, never on the data, so histograms with the same p merge by adding counts: across
/// devices, time buckets, shards and runs. The results database stores them as
/// (bucket index, count) rows for exactly that reason.
public struct LogLinearHistogram: Sendable, Equatable {
    public let precisionBits: Int
    public private(set) var counts: [UInt64] = []
    public private(set) var totalCount: UInt64 = 0
    public private(set) var sum: Double = 0
    public private(set) var minimum: UInt64 = .max
    public private(set) var maximum: UInt64 = 0

    public init(precisionBits: Int = 7) {
        precondition((1...16).contains(precisionBits), "precision must be 1...16 bits")
        self.precisionBits = precisionBits
    }

    /// The bucket that holds `value`.
    @inlinable
    public static func bucketIndex(of value: UInt64, precisionBits p: Int) -> Int {
        let linear = UInt64(1) << p
        if value < linear { return Int(value) }
        let magnitude = 63 - value.leadingZeroBitCount  // >= p
        let shift = magnitude - p
        let sub = Int(value >> UInt64(shift)) - Int(linear)  // in 0..<linear
        return Int(linear) + shift * Int(linear) + sub
    }

    /// The smallest value in bucket `index`.
    public static func lowerBound(ofBucket index: Int, precisionBits p: Int) -> UInt64 {
        let linear = 1 << p
        if index < linear { return UInt64(index) }
        let shift = (index - linear) / linear
        let sub = (index - linear) % linear
        return UInt64(linear + sub) << UInt64(shift)
    }

    /// The number of distinct values bucket `index` covers.
    public static func width(ofBucket index: Int, precisionBits p: Int) -> UInt64 {
        let linear = 1 << p
        if index < linear { return 1 }
        return UInt64(1) << UInt64((index - linear) / linear)
    }

    public mutating func record(_ value: UInt64, count: UInt64 = 1) {
        guard count > 0 else { return }
        let index = Self.bucketIndex(of: value, precisionBits: precisionBits)
        if index >= counts.count { counts.append(contentsOf: repeatElement(0, count: index + 1 - counts.count)) }
        counts[index] += count
        totalCount += count
        sum += Double(value) * Double(count)
        minimum = Swift.min(minimum, value)
        maximum = Swift.max(maximum, value)
    }

    /// Adds a bucket count read back from storage (the value is the bucket's lower bound).
    public mutating func add(bucket index: Int, count: UInt64, lowerBound: UInt64) {
        guard count > 0 else { return }
        if index >= counts.count { counts.append(contentsOf: repeatElement(0, count: index + 1 - counts.count)) }
        counts[index] += count
        totalCount += count
        let upper = lowerBound + Self.width(ofBucket: index, precisionBits: precisionBits) - 1
        sum += (Double(lowerBound) + Double(upper)) / 2 * Double(count)
        minimum = Swift.min(minimum, lowerBound)
        maximum = Swift.max(maximum, upper)
    }

    /// Adds every count of `other`, which must have the same precision.
    public mutating func merge(_ other: LogLinearHistogram) {
        precondition(other.precisionBits == precisionBits, "only histograms of equal precision merge")
        guard other.totalCount > 0 else { return }
        if other.counts.count > counts.count {
            counts.append(contentsOf: repeatElement(0, count: other.counts.count - counts.count))
        }
        for (index, count) in other.counts.enumerated() where count > 0 { counts[index] += count }
        totalCount += other.totalCount
        sum += other.sum
        minimum = Swift.min(minimum, other.minimum)
        maximum = Swift.max(maximum, other.maximum)
    }

    public var isEmpty: Bool { totalCount == 0 }
    public var mean: Double { totalCount == 0 ? 0 : sum / Double(totalCount) }

    /// The value at `percentile` (0...100): the highest value equivalent to the bucket
    /// that holds it, clamped to the recorded range (HdrHistogram's convention).
    public func value(atPercentile percentile: Double) -> UInt64 {
        guard totalCount > 0 else { return 0 }
        if percentile <= 0 { return minimum }
        let clamped = Swift.min(100, Swift.max(0, percentile))
        var rank = UInt64((clamped / 100 * Double(totalCount)).rounded(.up))
        rank = Swift.max(1, Swift.min(totalCount, rank))
        var seen: UInt64 = 0
        for (index, count) in counts.enumerated() where count > 0 {
            seen += count
            if seen >= rank {
                let highest = Self.lowerBound(ofBucket: index, precisionBits: precisionBits)
                    + Self.width(ofBucket: index, precisionBits: precisionBits) - 1
                return Swift.max(minimum, Swift.min(maximum, highest))
            }
        }
        return maximum
    }

    /// Non-empty buckets as (index, lower bound, count), in index order.
    public var nonEmptyBuckets: [(index: Int, lowerBound: UInt64, count: UInt64)] {
        counts.enumerated().compactMap { index, count in
            count == 0 ? nil : (index, Self.lowerBound(ofBucket: index, precisionBits: precisionBits), count)
        }
    }
}
