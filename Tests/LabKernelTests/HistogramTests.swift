import Testing
import LabKernel

@Suite("Log-linear histograms")
struct HistogramTests {
    @Test("every value lands in a bucket whose range contains it, within 2^-p relative width")
    func bucketGeometry() {
        var g = SeededGenerator(seed: 1)
        for p in [3, 7, 10] {
            for _ in 0..<20_000 {
                let value = g.next() >> UInt64(g.next(below: 64))
                let index = LogLinearHistogram.bucketIndex(of: value, precisionBits: p)
                let low = LogLinearHistogram.lowerBound(ofBucket: index, precisionBits: p)
                let width = LogLinearHistogram.width(ofBucket: index, precisionBits: p)
                #expect(low <= value && value - low < width, "value \(value) p \(p)")
                if value >= 1 << p { #expect(Double(width) <= Double(value) / Double(1 << p) * 2) }
            }
        }
    }

    @Test("percentiles are within the precision of the exact answer")
    func percentiles() {
        var g = SeededGenerator(seed: 2)
        var h = LogLinearHistogram(precisionBits: 7)
        var values: [UInt64] = []
        for _ in 0..<50_000 {
            let v = UInt64(Distribution.lognormal(median: 50_000_000, sigma: 1).sample(using: &g))
            values.append(v)
            h.record(v)
        }
        values.sort()
        for p in [50.0, 90, 99, 99.9] {
            let exact = Double(values[Int((p / 100 * Double(values.count)).rounded(.up)) - 1])
            let approx = Double(h.value(atPercentile: p))
            #expect(abs(approx - exact) / exact <= 1.0 / 128 + 1e-9, "p\(p): \(approx) vs \(exact)")
        }
        #expect(h.value(atPercentile: 100) == values.last!)
        #expect(h.value(atPercentile: 0) == values.first!)
    }

    @Test("merging equals recording everything in one histogram")
    func merge() {
        var g = SeededGenerator(seed: 3)
        var a = LogLinearHistogram(), b = LogLinearHistogram(), all = LogLinearHistogram()
        for i in 0..<10_000 {
            let v = g.next(below: 1_000_000_000)
            if i % 3 == 0 { a.record(v) } else { b.record(v) }
            all.record(v)
        }
        a.merge(b)
        #expect(a.counts == all.counts && a.totalCount == all.totalCount && a.maximum == all.maximum && a.minimum == all.minimum)
    }

    @Test("buckets read back from storage rebuild the same percentiles")
    func storageRoundTrip() {
        var h = LogLinearHistogram()
        for v in stride(from: UInt64(1), to: 1_000_000, by: 997) { h.record(v) }
        var rebuilt = LogLinearHistogram()
        for bucket in h.nonEmptyBuckets { rebuilt.add(bucket: bucket.index, count: bucket.count, lowerBound: bucket.lowerBound) }
        for p in [1.0, 50, 99] {
            let a = Double(h.value(atPercentile: p)), b = Double(rebuilt.value(atPercentile: p))
            #expect(abs(a - b) / a <= 1.0 / 128, "p\(p)")
        }
        #expect(rebuilt.totalCount == h.totalCount)
    }
}
