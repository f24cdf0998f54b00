import Testing
import LabKernel
import LabStore
@testable import Simulator

@Suite("Recorder and thresholds")
struct RecorderTests {
    @Test("counters sum per bucket, gauges keep their last value, histograms become rows")
    func buckets() {
        var recorder = Recorder()
        let events = recorder.register("sim.events")
        let mean = recorder.register("battery.mean")
        let level = recorder.register("battery.level")
        recorder.add(events, 2)
        recorder.add(events, 3)
        recorder.set(mean, 40)
        recorder.set(mean, 45)
        recorder.observe(level, 45)
        recorder.observe(level, 45)
        recorder.closeBucket(startingAt: 0)
        recorder.add(events, 1)
        recorder.closeBucket(startingAt: 60)
        recorder.closeRun()
        let batch = recorder.takeBatch()
        #expect(batch.metrics.map(\.name) == ["sim.events", "battery.mean", "battery.level"])
        #expect(batch.seriesPoints.filter { $0.metricID == events.id }.map(\.value) == [5, 1])
        #expect(batch.seriesPoints.filter { $0.metricID == mean.id }.map(\.value) == [45])
        #expect(batch.histogramBuckets.map(\.count) == [2] && batch.histogramBuckets[0].windowStart == 0)
        #expect(batch.counterTotals.first { $0.metricID == events.id }?.value == 6)
        #expect(recorder.takeBatch().isEmpty)
    }

    @Test("thresholds pass, fail, and fail loudly when a metric has no data")
    func thresholds() throws {
        var recorder = Recorder()
        let executed = recorder.register("ticks", labels: [("power_state", "Unplugged"), ("mode", "executed")])
        let skipped = recorder.register("ticks", labels: [("power_state", "Unplugged"), ("mode", "fast_forwarded")])
        let sessions = recorder.register("session.length", labels: [("app", "ours")])
        _ = recorder.register("session.length", labels: [("app", "other")])
        recorder.add(executed, 10)
        recorder.add(skipped, 30)
        for ms in 1...100 { recorder.observe(sessions, UInt64(ms) * 1_000_000) }
        recorder.closeBucket(startingAt: 0)
        let scenario = try ScenarioLoader.parse(text: """
            name: t
            seed: 1
            duration: 1h
            devices: [{name: p, count: 1}]
            thresholds:
              - {metric: ticks, max: 40}
              - {metric: ticks, labels: {mode: executed}, min: 11}
              - {metric: session.length, labels: {app: ours}, percentile: 99, max: 120ms}
              - {metric: session.length, labels: {app: other}, percentile: 50, max: 1s}
            """, file: "t.yaml")
        let results = ThresholdEvaluator.evaluate(scenario.thresholds, recorder: recorder)
        #expect(results.map(\.passed) == [true, false, true, false])
        #expect(results[0].observed == 40)
        #expect(results[1].message == "total(ticks{mode=executed}) = 10 breaks >= 11")
        #expect(results[2].observed.map { abs($0 - 99_000_000) < 1_000_000 } == true)
        #expect(results[3].observed == nil && results[3].message.contains("no data"))
    }

    @Test("checks made in any order report the counts and the first violation a sorted pass would")
    func unorderedChecks() {
        let keys = (0..<500).map { "m.d\($0 % 37).\($0)" }
        let breaks = Set(["m.d3.77", "m.d20.205", "m.d1.1"])
        var sorted = InvariantLedger()
        let a = sorted.register("sorted")
        for key in keys.sorted() { sorted.check(a, !breaks.contains(key), "\(key) broke") }
        var generator = StreamSeed(9).generator()
        for order in [keys, keys.reversed(), keys.shuffled(using: &generator)] {
            var ledger = InvariantLedger()
            let b = ledger.register("sorted")
            var checks = UnorderedChecks<String>()
            for key in order { checks.check(key, !breaks.contains(key), "\(key) broke") }
            checks.record(b, into: &ledger)
            #expect(ledger.rows == sorted.rows)
        }
        #expect(sorted.rows[0].checks == 500 && sorted.rows[0].violations == 3 && sorted.rows[0].firstViolation == "m.d1.1 broke")
    }
}
