/// A distribution of non-negative quantities (durations in seconds, counts, sizes),
/// sampled from a caller's `SeededGenerator`.
///
/// Sampling uses `DeterministicMath` and the polar method (which needs only `log` and
/// `sqrt`), so a seed gives the same samples on every platform.
public enum Distribution: Hashable, Sendable {
    /// Always `value`.
    case constant(Double)
    /// Uniform in [low, high].
    case uniform(low: Double, high: Double)
    /// Exponential with the given mean (Poisson inter-arrival times).
    case exponential(mean: Double)
    /// Log-normal with the given median (e^mu) and shape sigma: long-tailed latencies
    /// and session lengths.
    case lognormal(median: Double, sigma: Double)
    /// Piecewise-linear inverse CDF through (cumulative probability, value) points,
    /// sorted by probability, from 0 to 1: a measured latency table.
    case empirical([EmpiricalPoint])

    public struct EmpiricalPoint: Hashable, Sendable {
        public var probability: Double
        public var value: Double
        public init(probability: Double, value: Double) {
            self.probability = probability
            self.value = value
        }
    }

    /// Draws one value; never negative, never NaN.
    public func sample(using generator: inout SeededGenerator) -> Double {
        let value: Double
        switch self {
        case .constant(let v):
            value = v
        case .uniform(let low, let high):
            value = low + (high - low) * generator.nextUnit()
        case .exponential(let mean):
            // 1 - u is in (0, 1], so the logarithm is finite.
            value = -mean * DeterministicMath.log(1 - generator.nextUnit())
        case .lognormal(let median, let sigma):
            value = median * DeterministicMath.exp(sigma * Self.standardNormal(using: &generator))
        case .empirical(let points):
            value = Self.interpolate(points, at: generator.nextUnit())
        }
        return value.isNaN ? 0 : max(0, value)
    }

    /// Draws a duration, interpreting samples as seconds.
    public func sampleSpan(using generator: inout SeededGenerator) -> TimeSpan {
        .approximately(seconds: sample(using: &generator))
    }

    /// The mean of the distribution (used for reporting and for calibrating rates).
    public var mean: Double {
        switch self {
        case .constant(let v): return v
        case .uniform(let low, let high): return (low + high) / 2
        case .exponential(let mean): return mean
        case .lognormal(let median, let sigma): return median * DeterministicMath.exp(sigma * sigma / 2)
        case .empirical(let points):
            var total = 0.0
            for (a, b) in zip(points, points.dropFirst()) {
                total += (b.probability - a.probability) * (a.value + b.value) / 2
            }
            return total
        }
    }

    /// Marsaglia's polar method: exact standard normal deviates from two uniforms.
    static func standardNormal(using generator: inout SeededGenerator) -> Double {
        while true {
            let u = 2 * generator.nextUnit() - 1
            let v = 2 * generator.nextUnit() - 1
            let s = u * u + v * v
            if s > 0 && s < 1 {
                return u * (-2 * DeterministicMath.log(s) / s).squareRoot()
            }
        }
    }

    static func interpolate(_ points: [EmpiricalPoint], at p: Double) -> Double {
        guard let first = points.first else { return 0 }
        if p <= first.probability { return first.value }
        for (a, b) in zip(points, points.dropFirst()) where p <= b.probability {
            let width = b.probability - a.probability
            if width <= 0 { return b.value }
            return a.value + (b.value - a.value) * (p - a.probability) / width
        }
        return points[points.count - 1].value
    }
}

extension Distribution {
    /// Why this distribution cannot be sampled, or nil when it is well formed.
    public var validationProblem: String? {
        func bad(_ v: Double) -> Bool { !v.isFinite || v < 0 }
        switch self {
        case .constant(let v):
            return bad(v) ? "a constant must be a finite, non-negative number" : nil
        case .uniform(let low, let high):
            if bad(low) || bad(high) { return "uniform bounds must be finite and non-negative" }
            return low > high ? "uniform needs low <= high" : nil
        case .exponential(let mean):
            return bad(mean) || mean == 0 ? "exponential needs a positive mean" : nil
        case .lognormal(let median, let sigma):
            if bad(median) || median == 0 { return "lognormal needs a positive median" }
            return bad(sigma) ? "lognormal needs a finite, non-negative sigma" : nil
        case .empirical(let points):
            guard points.count >= 2 else { return "an empirical table needs at least two points" }
            guard points.first?.probability == 0, points.last?.probability == 1 else {
                return "an empirical table runs from probability 0 to probability 1"
            }
            for (a, b) in zip(points, points.dropFirst()) {
                if b.probability < a.probability { return "empirical probabilities must not decrease" }
                if b.value < a.value { return "empirical values must not decrease" }
            }
            return points.contains { bad($0.value) } ? "empirical values must be finite and non-negative" : nil
        }
    }
}
