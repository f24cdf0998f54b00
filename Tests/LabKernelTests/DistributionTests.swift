import Foundation
import Testing
import LabKernel

@Suite("Distributions and deterministic math")
struct DistributionTests {
    @Test("log and exp agree with the C library to within a few ulp")
    func mathAccuracy() {
        var g = SeededGenerator(seed: 11)
        for _ in 0..<20_000 {
            let x = DeterministicMath.exp((g.nextUnit() - 0.5) * 80)
            let ours = DeterministicMath.log(x)
            let libm = Foundation.log(x)
            #expect(abs(ours - libm) <= 4 * libm.ulp.magnitude + 1e-300, "log(\(x))")
            let y = (g.nextUnit() - 0.5) * 1_000
            let e = DeterministicMath.exp(y)
            #expect(abs(e - Foundation.exp(y)) <= 8 * Foundation.exp(y).ulp, "exp(\(y))")
        }
        #expect(DeterministicMath.log(1) == 0)
        #expect(DeterministicMath.log(0) == -.infinity)
        #expect(DeterministicMath.log(-1).isNaN)
        #expect(DeterministicMath.exp(0) == 1)
        #expect(DeterministicMath.exp(1_000) == .infinity)
    }

    @Test("sample means converge to each family's mean", arguments: [
        Distribution.constant(3),
        .uniform(low: 2, high: 6),
        .exponential(mean: 20),
        .lognormal(median: 90, sigma: 1.0),
        .empirical([.init(probability: 0, value: 0), .init(probability: 0.5, value: 10), .init(probability: 1, value: 100)]),
    ])
    func means(distribution: Distribution) {
        var g = SeededGenerator(seed: 5)
        let n = 200_000
        var sum = 0.0
        for _ in 0..<n {
            let v = distribution.sample(using: &g)
            #expect(v >= 0)
            sum += v
        }
        let mean = sum / Double(n)
        #expect(abs(mean - distribution.mean) <= distribution.mean * 0.02 + 1e-9, "\(distribution): \(mean) vs \(distribution.mean)")
    }

    @Test("the same seed gives the same samples")
    func deterministic() {
        var a = SeededGenerator(seed: 9), b = SeededGenerator(seed: 9)
        let d = Distribution.lognormal(median: 2, sigma: 0.7)
        let first = (0..<1_000).map { _ in d.sample(using: &a) }
        let second = (0..<1_000).map { _ in d.sample(using: &b) }
        #expect(first == second)
    }

    @Test("ill-formed distributions are explained")
    func validation() {
        #expect(Distribution.uniform(low: 5, high: 1).validationProblem == "uniform needs low <= high")
        #expect(Distribution.exponential(mean: 0).validationProblem != nil)
        #expect(Distribution.lognormal(median: -1, sigma: 1).validationProblem != nil)
        #expect(Distribution.empirical([.init(probability: 0.2, value: 1), .init(probability: 1, value: 2)]).validationProblem != nil)
        #expect(Distribution.constant(.infinity).validationProblem != nil)
        #expect(Distribution.lognormal(median: 1, sigma: 0.5).validationProblem == nil)
    }
}
