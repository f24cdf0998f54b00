import Foundation
import Testing
import LabKernel
import LabStore
import LabTestSupport

@Suite("Results database")
struct ResultsDatabaseTests {
    static func sampleBatch() -> ResultsBatch {
        var batch = ResultsBatch()
        batch.scenario = ScenarioRow(name: "t", text: "name: t\n", sha256: SHA256Hex.of("name: t\n"), seed: 9, startTimeOfDay: 0,
                                     durationNanoseconds: 3_600_000_000_000, bucketNanoseconds: 60_000_000_000, devices: 2, tickMode: "fast-forward")
        batch.deviceClasses = [DeviceClassRow(id: 0, name: "phones", count: 2, firstDevice: 0, parameters: "{}")]
        batch.metrics = [
            MetricDescriptor(id: 0, name: "ticks", labels: "mode=executed,power_state=Unplugged", kind: .counter, unit: "count", description: "d"),
            MetricDescriptor(id: 1, name: "session.length", labels: "app=ours", kind: .histogram, unit: "ns", precisionBits: 7, description: "d"),
        ]
        batch.seriesPoints = [SeriesPointRow(metricID: 0, bucketStart: 0, value: 5), SeriesPointRow(metricID: 0, bucketStart: 60_000_000_000, value: 7)]
        var h = LogLinearHistogram()
        for v: UInt64 in [1_000, 2_000, 2_000, 50_000] { h.record(v) }
        batch.histogramBuckets = h.nonEmptyBuckets.map {
            HistogramBucketRow(metricID: 1, windowStart: 0, bucketIndex: $0.index, lowerBound: $0.lowerBound,
                               upperBound: $0.lowerBound + LogLinearHistogram.width(ofBucket: $0.index, precisionBits: 7) - 1, count: $0.count)
        }
        batch.counterTotals = [(0, 12)]
        batch.events = [EventSampleRow(seq: 0, at: 5, device: 1, kind: "lifecycle", detail: "killed -> foreground (relaunched)")]
        batch.thresholds = [ThresholdResultRow(id: 0, metric: "ticks", statistic: "total", op: "<=", bound: 10, observed: 12, passed: false, message: "m")]
        batch.invariants = [InvariantResultRow(name: "x", checks: 4, violations: 0, firstViolation: nil)]
        batch.runMetadata = [("wall_seconds", "1.5")]
        return batch
    }

    @Test("a written batch reads back field for field")
    func writeAndLoad() throws {
        let dir = TestPaths.scratchDirectory()
        let path = dir.appendingPathComponent("results.sqlite").path
        let db = try ResultsDatabase.create(at: path)
        try db.write(Self.sampleBatch())
        try db.checkpoint()
        let results = try ResultsDatabase.open(at: path).load()
        #expect(results.scenario.seed == 9 && results.scenario.devices == 2)
        #expect(results.total("ticks", labels: "mode=executed,power_state=Unplugged") == 12)
        #expect(results.series[0]?.map(\.value) == [5, 7])
        let histogram = results.histogram(results.metric(named: "session.length", labels: "app=ours")!)
        #expect(histogram.totalCount == 4)
        #expect(results.events.first?.detail == "killed -> foreground (relaunched)")
        #expect(results.thresholds.first?.passed == false && !results.thresholdsPassed)
        #expect(results.invariantsPassed)
        #expect(results.runMetadata["wall_seconds"] == "1.5")
        #expect(!FileManager.default.fileExists(atPath: path + "-wal"), "the finished file has no WAL beside it")
    }

    @Test("a load test still going reads its counters' totals as their buckets so far; a finished one as written")
    func runningTotals() throws {
        let dir = TestPaths.scratchDirectory()
        func load(_ name: String, _ edit: (inout ResultsBatch) -> Void) throws -> RunResults {
            let path = dir.appendingPathComponent(name).path
            var batch = Self.sampleBatch()
            edit(&batch)
            try ResultsDatabase.create(at: path).write(batch)
            return try ResultsDatabase.open(at: path).load()
        }
        let running = try load("running.sqlite") { batch in
            batch.counterTotals = []
            batch.runMetadata = [("mode", "loadtest")]
        }
        #expect(running.isRunning && running.total("ticks", labels: "mode=executed,power_state=Unplugged") == 12)
        let finished = try load("finished.sqlite") { batch in
            batch.counterTotals = [(0, 20)]  // not its buckets' 12: what the end wrote is what counts
            batch.runMetadata = [("mode", "loadtest"), ("wall_seconds", "1.5")]
        }
        #expect(!finished.isRunning && finished.total("ticks", labels: "mode=executed,power_state=Unplugged") == 20)
        let simulated = try load("simulated.sqlite") { $0.counterTotals = [] }
        #expect(simulated.total("ticks", labels: "mode=executed,power_state=Unplugged") == nil, "a simulation's totals are only what it wrote")
    }

    @Test("the digest covers results but not wall-clock run metadata")
    func digest() throws {
        let dir = TestPaths.scratchDirectory()
        func make(_ name: String, _ edit: (inout ResultsBatch) -> Void) throws -> String {
            let path = dir.appendingPathComponent(name).path
            let db = try ResultsDatabase.create(at: path)
            var batch = Self.sampleBatch()
            edit(&batch)
            try db.write(batch)
            return try ResultsDigest.compute(db)
        }
        let base = try make("a.sqlite") { _ in }
        #expect(base.count == 64)
        #expect(try make("b.sqlite") { $0.runMetadata = [("wall_seconds", "99")] } == base)
        #expect(try make("c.sqlite") { $0.seriesPoints[1].value = 8 } != base)
        #expect(try make("d.sqlite") { $0.events[0].detail = "other" } != base)
    }

    @Test("opening something that is not a results database says so")
    func notResults() throws {
        let dir = TestPaths.scratchDirectory()
        let missing = dir.appendingPathComponent("missing.sqlite").path
        #expect(throws: ResultsDatabaseError.unreadable(missing)) { _ = try ResultsDatabase.open(at: missing) }
        let other = dir.appendingPathComponent("other.sqlite").path
        let db = try SQLiteDatabase(path: other)
        try db.execute("CREATE TABLE x (y)")
        #expect(throws: ResultsDatabaseError.notResults(other)) { _ = try ResultsDatabase.open(at: other) }
        let text = dir.appendingPathComponent("text.sqlite").path
        try "hello".write(toFile: text, atomically: true, encoding: .utf8)
        #expect(throws: (any Error).self) { _ = try ResultsDatabase.open(at: text) }
    }
}
