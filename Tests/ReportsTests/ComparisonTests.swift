import Foundation
import Testing
import LabKernel
import LabStore
import LabTestSupport
@testable import Reports

/// Two small hand-made runs: sync latency, a failure counter, a neutral request counter,
/// battery, a histogram with few samples, and one threshold.
struct ComparisonFixture {
    var syncLatencyMs: [Double] = Array(repeating: 100, count: 900) + Array(repeating: 400, count: 100)
    var failures = 2.0
    var requests = 1_000.0
    var battery = 60.0
    var rareMs: [Double] = [50, 60]
    var thresholdPassed = true
    /// `http.requests` of the failures' endpoint, when the run counted them.
    var httpRequests: Double?

    func results(name: String = "cmp") -> RunResults {
        var results = RunResults(scenario: ScenarioRow(name: name, text: "", sha256: "s-\(name)", seed: 1, startTimeOfDay: 0,
                                                       durationNanoseconds: 3_600_000_000_000, bucketNanoseconds: 900_000_000_000,
                                                       devices: 10, tickMode: "fast-forward"))
        results.metrics = [
            MetricDescriptor(id: 1, name: "http.latency", labels: "endpoint=POST /sync,stack=sync", kind: .histogram, unit: "ns", precisionBits: 7, description: ""),
            MetricDescriptor(id: 2, name: "http.failures", labels: "endpoint=POST /sync,stack=sync", kind: .counter, unit: "count", description: ""),
            MetricDescriptor(id: 3, name: "sync.requests", labels: "", kind: .counter, unit: "count", description: ""),
            MetricDescriptor(id: 4, name: "battery.mean", labels: "", kind: .gauge, unit: "%", description: ""),
            MetricDescriptor(id: 5, name: "workflow.step_latency", labels: "step=rare", kind: .histogram, unit: "ns", precisionBits: 7, description: ""),
        ]
        func rows(_ id: Int, _ ms: [Double]) -> [HistogramBucketRow] {
            var h = LogLinearHistogram(precisionBits: 7)
            for value in ms { h.record(UInt64(value * 1e6)) }
            return h.nonEmptyBuckets.map {
                HistogramBucketRow(metricID: id, windowStart: 0, bucketIndex: $0.index, lowerBound: $0.lowerBound,
                                   upperBound: $0.lowerBound + LogLinearHistogram.width(ofBucket: $0.index, precisionBits: 7) - 1, count: $0.count)
            }
        }
        results.histogramRows = [1: rows(1, syncLatencyMs), 5: rows(5, rareMs)]
        results.counterTotals = [2: failures, 3: requests]
        if let httpRequests {
            results.metrics.append(MetricDescriptor(id: 6, name: "http.requests", labels: "endpoint=POST /sync,stack=sync", kind: .counter, unit: "count",
                                                    description: ""))
            results.counterTotals[6] = httpRequests
        }
        results.series = [4: [SeriesPointRow(metricID: 4, bucketStart: 0, value: battery)]]
        results.thresholds = [ThresholdResultRow(id: 0, metric: "http.latency{stack=sync}", statistic: "p99", op: "<=", bound: 1e9,
                                                 observed: 4e8, passed: thresholdPassed, message: "p99(http.latency{stack=sync}) = 400ms")]
        results.runMetadata = ["build": "fleetlab test"]
        return results
    }
}

func compare(_ before: ComparisonFixture, _ after: ComparisonFixture, policy: ComparisonPolicy = ComparisonPolicy(),
             digests: (String, String) = ("a", "b")) -> RunComparison {
    RunComparison(baseline: before.results(), baselinePath: "base.sqlite", baselineDigest: digests.0,
                  candidate: after.results(), candidatePath: "cand.sqlite", candidateDigest: digests.1, policy: policy)
}

@Suite("Run comparison")
struct ComparisonTests {
    @Test("equal digests are identical and stop there")
    func identical() {
        let c = compare(ComparisonFixture(), ComparisonFixture(), digests: ("d", "d"))
        #expect(c.identical && c.passed && c.figures.isEmpty)
        #expect(c.summary(htmlPath: nil).contains("IDENTICAL"))
    }

    @Test("a p99 that grows 20 % fails a 5 % limit and passes a 25 % one; improvements never fail")
    func latencyRegression() throws {
        var slower = ComparisonFixture()
        slower.syncLatencyMs = Array(repeating: 100, count: 900) + Array(repeating: 480, count: 100)
        let c = compare(ComparisonFixture(), slower)
        let p99 = try #require(c.figures.first { $0.metric == "http.latency" && $0.statistic == "p99" })
        #expect(p99.better == .lower && p99.judged)
        #expect(abs(p99.regression - 0.2) < 0.02, "\(p99.regression)")
        #expect(c.breaches.map(\.kind) == [.regression])
        #expect(c.breaches.first?.name == "http.latency{endpoint=POST /sync,stack=sync} p99")
        #expect(compare(ComparisonFixture(), slower, policy: ComparisonPolicy(maxRegression: 0.25)).passed)
        #expect(compare(slower, ComparisonFixture()).passed, "faster is better, not a regression")
        #expect(c.summary(htmlPath: "x.html").contains("▲ worse"))
    }

    @Test("direction: battery down and failures up are worse; a request count is shown, not judged")
    func directions() throws {
        var after = ComparisonFixture()
        after.battery = 50
        after.failures = 3
        after.requests = 2_000
        let c = compare(ComparisonFixture(), after)
        let kinds = Dictionary(uniqueKeysWithValues: c.figures.map { ("\($0.metric) \($0.statistic)", $0) })
        #expect(kinds["battery.mean mean"]?.better == .higher)
        #expect(kinds["battery.mean mean"]?.regression ?? 0 > 0.16)
        #expect(kinds["http.failures total"]?.better == .lower)
        #expect(kinds["sync.requests total"]?.better == .neither)
        #expect(kinds["sync.requests total"]?.judged == false)
        #expect(Set(c.breaches.map(\.name)) == ["battery.mean mean", "http.failures{endpoint=POST /sync,stack=sync} total"])
    }

    @Test("with the requests counted, failures are judged as a share of them: twice the load with twice the failures is no regression, twice the failures for the same load is")
    func failureRate() throws {
        let failures = "http.failures{endpoint=POST /sync,stack=sync}"
        var before = ComparisonFixture(), busier = ComparisonFixture(), worse = ComparisonFixture()
        before.httpRequests = 1_000
        (busier.failures, busier.httpRequests) = (4, 2_000)
        (worse.failures, worse.httpRequests) = (4, 1_000)
        let same = compare(before, busier)
        let rate = try #require(same.figures.first { $0.name == "\(failures) rate" })
        #expect(rate.baseline == 0.002 && rate.candidate == 0.002 && rate.judged && rate.unit == .share)
        #expect(same.figures.first { $0.name == "\(failures) total" }?.judged == false, "the count follows the load: shown, not judged")
        #expect(same.passed, "\(same.breaches.map(\.name))")
        let doubled = compare(before, worse)
        #expect(doubled.breaches.map(\.name) == ["\(failures) rate"])
        #expect(doubled.summary(htmlPath: nil).contains("0.20% → 0.40%"), "\(doubled.summary(htmlPath: nil))")
        // On fewer requests than the sample floor, a rate is shown but not judged; nor is the
        // count, which the rate stands for.
        var few = before, fewWorse = worse
        (few.httpRequests, fewWorse.httpRequests) = (50, 50)
        #expect(compare(few, fewWorse).breaches.isEmpty)
    }

    @Test("a metric only one run recorded is named as new or gone, not counted as unchanged, and moves no verdict")
    func metricsInOneRun() throws {
        let before = ComparisonFixture().results()
        var after = before
        after.metrics.append(MetricDescriptor(id: 6, name: "energy.device_day", labels: "population=phones,stack=all", kind: .counter,
                                              unit: "count", description: ""))
        after.counterTotals[6] = 3
        after.metrics.removeAll { $0.id == 3 }
        let c = RunComparison(baseline: before, baselinePath: "base.sqlite", baselineDigest: "a", candidate: after, candidatePath: "cand.sqlite",
                              candidateDigest: "b", policy: ComparisonPolicy())
        #expect(c.metricsOnlyIn.candidate == ["energy.device_day{population=phones,stack=all}"] && c.metricsOnlyIn.baseline == ["sync.requests"])
        let summary = c.summary(htmlPath: nil)
        #expect(summary.contains("2 in one run only") && summary.contains("new         1 metrics: energy.device_day{population=phones,stack=all}")
                && summary.contains("gone        1 metrics: sync.requests"), "\(summary)")
        #expect(summary.contains("none of the figures both runs have moved") && !summary.contains("every figure is equal"))
        #expect(c.passed)
        let page = ComparisonPage.render(c)
        #expect(page.contains("Only the candidate has (1): <code>energy.device_day{population=phones,stack=all}</code>")
                && page.contains("Only the baseline has (1): <code>sync.requests</code>"))
    }

    @Test("a judged figure the candidate of the same scenario lacks fails the comparison (a build that stopped syncing has no sync latency to get worse); between different scenarios only a --metric limit naming it does")
    func judgedFigureGone() throws {
        let before = ComparisonFixture().results()
        var after = before
        // Sync latency (1,000 samples), the rare step's (2), and the failures counter: no
        // failure recorded is none, which is not worse.
        after.metrics.removeAll { $0.id == 1 || $0.id == 5 || $0.id == 2 }
        func run(_ candidate: RunResults, _ policy: ComparisonPolicy = ComparisonPolicy()) -> RunComparison {
            RunComparison(baseline: before, baselinePath: "base.sqlite", baselineDigest: "a", candidate: candidate, candidatePath: "cand.sqlite",
                          candidateDigest: "b", policy: policy)
        }
        let c = run(after)
        #expect(c.sameScenario && !c.passed)
        #expect(c.breaches.map(\.name) == ["p50", "p90", "p99"].map { "http.latency{endpoint=POST /sync,stack=sync} \($0)" },
                "not the max (one sample), not the count (no direction), not the rare step")
        #expect(c.breaches.contains { $0.message == "http.latency{endpoint=POST /sync,stack=sync} p99 was 400.6ms; the candidate has no such figure" }, "\(c.breaches)")
        #expect(!c.breaches.contains { $0.name.hasPrefix("workflow.step_latency") }, "2 samples are shown, not judged")
        #expect(c.summary(htmlPath: nil).contains("✗ http.latency{endpoint=POST /sync,stack=sync} p50 was"))

        var other = after
        other.scenario.sha256 = "another scenario"
        #expect(run(other).passed, "a scenario without the sync stack has no sync latency by design")
        let limited = run(other, ComparisonPolicy(limits: [try MetricLimit(parsing: "http.latency:p99=10%")]))
        #expect(limited.breaches.map(\.message) == ["http.latency{endpoint=POST /sync,stack=sync} p99 was 400.6ms; the candidate has no such figure, past --metric http.latency:p99=10%"])
    }

    @Test("a percentile on fewer samples than the floor is shown with its direction but not judged")
    func fewSamples() throws {
        var after = ComparisonFixture()
        after.rareMs = [500, 600]
        let c = compare(ComparisonFixture(), after)
        let rare = try #require(c.figures.first { $0.metric == "workflow.step_latency" && $0.statistic == "p99" })
        #expect(rare.regression > 5 && !rare.judged)
        #expect(c.passed)
        #expect(!compare(ComparisonFixture(), after, policy: ComparisonPolicy(minSamples: 2)).passed)
    }

    @Test("--metric limits name figures by metric, labels and statistic, and judge neutral ones both ways")
    func metricLimits() throws {
        var after = ComparisonFixture()
        after.requests = 800
        let limit = try MetricLimit(parsing: "sync.requests=10%")
        let c = compare(ComparisonFixture(), after, policy: ComparisonPolicy(maxRegression: nil, limits: [limit]))
        #expect(c.breaches.map(\.kind) == [.limit])
        #expect(c.breaches.first?.message.contains("−20.0 %") == true)
        let labelled = try MetricLimit(parsing: "http.latency{stack=sync}:p50=1%")
        #expect(labelled.metric == "http.latency" && labelled.statistic == "p50" && labelled.labels.map(\.1) == ["sync"])
        #expect(labelled.matches(c.figures.first { $0.metric == "http.latency" && $0.statistic == "p50" }!))
        #expect(!labelled.matches(c.figures.first { $0.metric == "http.latency" && $0.statistic == "p99" }!))
        for bad in ["sync.requests", "sync.requests=ten", "=5%", "x{stack=sync=5%", "x{stack}=5%"] {
            #expect(throws: MetricLimitError.self) { try MetricLimit(parsing: bad) }
        }
    }

    @Test("a candidate that fails its own threshold fails the comparison, and the change of state is shown")
    func candidateThreshold() {
        var after = ComparisonFixture()
        after.thresholdPassed = false
        let c = compare(ComparisonFixture(), after)
        #expect(c.breaches.map(\.kind) == [.threshold])
        #expect(c.thresholds.first?.name == "p99(http.latency{stack=sync}) <= 1.00s")
        #expect(c.summary(htmlPath: nil).contains("passed → failed"))
    }

    @Test("a threshold the baseline held that the candidate does not check (taken out, or loosened) fails the comparison, whatever the scenarios; one the baseline failed does not")
    func thresholdUnchecked() throws {
        var loosened = ComparisonFixture().results(name: "other")
        loosened.thresholds[0].bound = 2e9
        let c = RunComparison(baseline: ComparisonFixture().results(), baselinePath: "base.sqlite", baselineDigest: "a",
                              candidate: loosened, candidatePath: "cand.sqlite", candidateDigest: "b")
        #expect(!c.sameScenario)
        #expect(c.breaches.map(\.message) == ["threshold no longer checked: p99(http.latency{stack=sync}) <= 1.00s held in the baseline; the candidate does not check it"])
        let junit = JUnitReport.comparison(c, expectIdentical: false, timestamp: "2026-11-29T00:00:00Z", summary: "").xml
        #expect(junit.contains("<testcase name=\"p99(http.latency{stack=sync}) &lt;= 1.00s\" classname=\"fleetlab.thresholds\""), "\(junit)")
        #expect(junit.contains("<failure message=\"p99(http.latency{stack=sync}) &lt;= 1.00s held in the baseline"), "\(junit)")
        var failing = ComparisonFixture()
        failing.thresholdPassed = false
        var removed = ComparisonFixture().results(name: "other")
        removed.thresholds = []
        #expect(RunComparison(baseline: failing.results(), baselinePath: "b", baselineDigest: "a", candidate: removed, candidatePath: "c",
                              candidateDigest: "b").passed, "a bound the baseline did not hold is not lost by dropping it")
    }

    @Test("the page leads with the verdict, overlays both distributions and escapes what it shows")
    func page() throws {
        var slower = ComparisonFixture()
        slower.syncLatencyMs = Array(repeating: 100, count: 900) + Array(repeating: 480, count: 100)
        let html = ComparisonPage.render(compare(ComparisonFixture(), slower))
        #expect(html.contains("Failed: 1 past a limit"))
        #expect(html.contains("http.latency{endpoint=POST /sync,stack=sync}"))
        #expect(html.components(separatedBy: "<polyline").count - 1 == 4, "baseline and candidate for each of the two latency histograms")
        #expect(!html.contains("<script"))
        #expect(ComparisonPage.render(compare(ComparisonFixture(), ComparisonFixture(), digests: ("d", "d"))).contains("Identical"))
    }

    @Test("headless Chromium shows the failed verdict and the overlays, fetching nothing")
    func chromium() async throws {
        var slower = ComparisonFixture()
        slower.syncLatencyMs = Array(repeating: 100, count: 900) + Array(repeating: 480, count: 100)
        let dir = TestPaths.scratchDirectory("compare")
        let file = dir.appendingPathComponent("compare.html")
        try ComparisonPage.render(compare(ComparisonFixture(), slower)).write(to: file, atomically: true, encoding: .utf8)
        let load = try await cpuBound { try HeadlessChromium.load(file: file, width: 1200, height: 1600) }
        #expect(load.pageRequests.isEmpty)
        let (verdict, lines) = try await cpuBound { () throws -> (String, Int) in
            let page = try ChromiumSession(url: file.absoluteString, width: 1200, height: 1600)
            try page.wait(until: "document.querySelector('#verdict') !== null")
            let verdict = try page.evaluate("document.querySelector('#verdict .verdict.fail').textContent") as? String ?? ""
            let lines = (try page.evaluate("document.querySelectorAll('svg.chart polyline').length") as? NSNumber)?.intValue ?? 0
            return (verdict, lines)
        }
        #expect(verdict == "Failed: 1 past a limit")
        #expect(lines == 4)
    }
}

@Suite("JUnit report")
struct JUnitReportTests {
    @Test("text is escaped for XML and characters XML 1.0 cannot carry are dropped")
    func escaping() {
        #expect(JUnitReport.escape("a\u{01}b<'\"&>\tc\u{FFFE}") == "ab&lt;&#39;&quot;&amp;&gt;\tc")
    }

    @Test("a failed check is a failure element with its first line as the message; passed ones are empty test cases")
    func shape() {
        var report = JUnitReport(suite: "s", timestamp: "2026-11-25T10:00:00")
        report.cases = [.init(name: "ok", classname: "thresholds", failure: nil),
                        .init(name: "bad", classname: "invariants", failure: "first line\nsecond", failureType: "invariant")]
        let xml = report.xml
        #expect(xml.contains("tests=\"2\" failures=\"1\" errors=\"0\""))
        #expect(xml.contains("<testcase name=\"ok\" classname=\"fleetlab.thresholds\" time=\"0\"/>"))
        #expect(xml.contains("<failure message=\"first line\" type=\"invariant\">first line\nsecond</failure>"))
    }
}
