/// SplitMix64: the seeding function of the xoshiro family. Used only to expand a 64-bit
/// seed into generator state and to mix stream labels; never to draw simulation values.
public struct SplitMix64: Sendable {
    public var state: UInt64

    @inlinable public init(state: UInt64) { self.state = state }

    @inlinable
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        return Self.mix(state)
    }

    /// The SplitMix64 output function: a strong 64-bit bijective mixer.
    @inlinable
    public static func mix(_ value: UInt64) -> UInt64 {
        var z = value
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// xoshiro256**: the generator every core and device draws from.
///
/// 32 bytes of state, no allocation, and a stable, documented algorithm: unlike the
/// standard library's `random(in:using:)` range reduction, `next(below:)` here is ours,
/// so a seed reproduces a run on every build of the same source.
public struct SeededGenerator: RandomNumberGenerator, Sendable, Equatable {
    @usableFromInline var s0: UInt64
    @usableFromInline var s1: UInt64
    @usableFromInline var s2: UInt64
    @usableFromInline var s3: UInt64

    /// Expands `seed` through SplitMix64, as the xoshiro authors recommend.
    public init(seed: UInt64) {
        var mixer = SplitMix64(state: seed)
        s0 = mixer.next(); s1 = mixer.next(); s2 = mixer.next(); s3 = mixer.next()
        if s0 | s1 | s2 | s3 == 0 { s0 = 1 }  // the all-zero state is a fixed point
    }

    /// The generator's four state words, to store and restore a stream mid-way.
    public var state: [UInt64] { [s0, s1, s2, s3] }

    /// Resumes a stream from `state` (four words, not all zero).
    public init?(state: [UInt64]) {
        guard state.count == 4, state.contains(where: { $0 != 0 }) else { return nil }
        (s0, s1, s2, s3) = (state[0], state[1], state[2], state[3])
    }

    @inlinable
    public mutating func next() -> UInt64 {
        let result = (s1 &* 5).rotatedLeft(by: 7) &* 9
        let t = s1 << 17
        s2 ^= s0
        s3 ^= s1
        s1 ^= s2
        s0 ^= s3
        s2 ^= t
        s3 = s3.rotatedLeft(by: 45)
        return result
    }

    /// A uniform integer in `0..<bound` (Lemire's nearly-divisionless method, unbiased).
    @inlinable
    public mutating func next(below bound: UInt64) -> UInt64 {
        precondition(bound > 0, "next(below:) needs a positive bound")
        var product = next().multipliedFullWidth(by: bound)
        if product.low < bound {
            let threshold = (0 &- bound) % bound
            while product.low < threshold { product = next().multipliedFullWidth(by: bound) }
        }
        return product.high
    }

    /// A uniform integer in `range`.
    @inlinable
    public mutating func next(in range: ClosedRange<Int64>) -> Int64 {
        let width = UInt64(bitPattern: range.upperBound &- range.lowerBound) &+ 1
        if width == 0 { return Int64(bitPattern: next()) }
        return range.lowerBound &+ Int64(bitPattern: next(below: width))
    }

    /// A uniform double in [0, 1) with 53 random bits.
    @inlinable
    public mutating func nextUnit() -> Double {
        Double(next() >> 11) * 0x1.0p-53
    }

    /// True with probability `ratio`; integer arithmetic only, so control flow never
    /// depends on floating-point rounding.
    @inlinable
    public mutating func chance(_ ratio: Ratio) -> Bool {
        if ratio.numerator == 0 { return false }
        if ratio.numerator >= ratio.denominator { return true }
        return next(below: UInt64(ratio.denominator)) < UInt64(ratio.numerator)
    }
}

extension UInt64 {
    @inlinable
    func rotatedLeft(by amount: UInt64) -> UInt64 { (self << amount) | (self >> (64 - amount)) }
}

extension SeededGenerator {
    /// `count` bytes from the stream (ids, tokens, salts and key seeds of server cores).
    public mutating func bytes(_ count: Int) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(count + 8)
        while out.count < count { withUnsafeBytes(of: next()) { out.append(contentsOf: $0) } }
        return Array(out.prefix(count))
    }

    /// A lowercase hex token of `count` random bytes.
    public mutating func token(_ count: Int) -> String { bytes(count).hexString }
}

extension SeededGenerator: Codable {
    public init(from decoder: any Decoder) throws {
        let words = try decoder.singleValueContainer().decode([UInt64].self)
        guard let generator = SeededGenerator(state: words) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "a generator state is four words, not all zero"))
        }
        self = generator
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(state)
    }
}
