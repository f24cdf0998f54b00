/// Logarithm and exponential built from IEEE-754 basic operations only.
///
/// libm's `log` and `exp` may differ in the last bit between C libraries and CPUs; a
/// sampled think time that differs by one nanosecond reorders events and forks a run.
/// Addition, multiplication, division and square root are correctly rounded everywhere,
/// so these functions give the same bits on every platform. Accuracy is within a few ulp,
/// which is far below what any latency model needs.
public enum DeterministicMath {
    private static let ln2Hi = 6.93147180369123816490e-01
    private static let ln2Lo = 1.90821492927058770002e-10
    private static let sqrtHalf = 0.70710678118654752440
    /// 1/1, 1/3, 1/5, … for the atanh series (multiplying beats dividing in the hot loop).
    private static let oddReciprocals: [Double] = (0..<14).map { 1 / Double(2 * $0 + 1) }
    /// 1/n for the exponential series, index n.
    private static let reciprocals: [Double] = (0...20).map { $0 == 0 ? 0 : 1 / Double($0) }

    /// Natural logarithm; `-infinity` for 0, NaN for negatives and NaN.
    public static func log(_ x: Double) -> Double {
        if x.isNaN || x < 0 { return .nan }
        if x == 0 { return -.infinity }
        if x.isInfinite { return .infinity }
        // x = m * 2^e with m in [sqrt(1/2), sqrt(2)).
        var e = Double(x.exponent)
        var m = x.significand  // in [1, 2)
        if m > 2 * sqrtHalf {
            m /= 2
            e += 1
        }
        // ln(m) = 2 atanh(s), s = (m - 1) / (m + 1), |s| < 0.172.
        let s = (m - 1) / (m + 1)
        let s2 = s * s
        var term = s
        var sum = 0.0
        for k in 0..<14 {
            sum += term * oddReciprocals[k]
            term *= s2
        }
        return 2 * sum + e * ln2Lo + e * ln2Hi
    }

    /// e raised to `x`; 0 below about -745, infinity above about 709.
    public static func exp(_ x: Double) -> Double {
        if x.isNaN { return .nan }
        if x > 709.78 { return .infinity }
        if x < -745.2 { return 0 }
        let k = (x / (ln2Hi + ln2Lo)).rounded()
        let r = (x - k * ln2Hi) - k * ln2Lo  // |r| <= 0.347
        var term = 1.0
        var sum = 1.0
        for n in 1...20 {
            term *= r * reciprocals[n]
            sum += term
        }
        return scale(sum, byPowerOfTwo: Int(k))
    }

    private static func scale(_ value: Double, byPowerOfTwo k: Int) -> Double {
        // Scale in two steps so that subnormal results and 2^1024 intermediates stay exact.
        let half = k / 2
        return value * Double(sign: .plus, exponent: half, significand: 1)
            * Double(sign: .plus, exponent: k - half, significand: 1)
    }
}
