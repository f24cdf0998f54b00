import Testing
import LabKernel
import LabStore
@testable import Simulator

/// Thresholds on a ratio (`per`): k6's `http_req_failed: rate<0.01`, written
/// `{metric: http.failures, per: http.requests, max: 1%}`.
@Suite("Ratio thresholds")
struct RatioThresholdTests {
    static func thresholds(_ lines: String) throws(ScenarioError) -> [Threshold] {
        try ScenarioLoader.parse(text: """
            name: t
            seed: 1
            duration: 1h
            devices: [{name: p, count: 1}]
            thresholds:
            \(lines)
            """, file: "t.yaml").thresholds
    }

    /// 1,000 sync requests of which 12 failed, 200 chat requests of which 30 failed, and
    /// their bytes; 40 sync requests timed out of 990 with an outcome.
    static func recorder() -> Recorder {
        var recorder = Recorder()
        for (stack, requests, failures) in [("sync", 1_000.0, 12.0), ("chat", 200, 30)] {
            let labels = [("stack", stack), ("endpoint", "POST /\(stack)")]
            recorder.add(recorder.register("http.requests", labels: labels), requests)
            recorder.add(recorder.register("http.failures", labels: labels), failures)
            recorder.add(recorder.register("network.bytes", labels: [("stack", stack), ("direction", "up")]), requests * 1_500)
        }
        recorder.add(recorder.register("sync.requests", labels: [("outcome", "ok")]), 950)
        recorder.add(recorder.register("sync.requests", labels: [("outcome", "timeout")]), 40)
        _ = recorder.register("agent.chats", labels: [("workflow", "w")])
        recorder.closeBucket(startingAt: 0)
        return recorder
    }

    @Test("a ratio divides one total by another: failures per request by stack, a share of one counter's outcomes, bytes per request")
    func evaluates() throws {
        let rows = ThresholdEvaluator.evaluate(try Self.thresholds("""
              - {metric: http.failures, labels: {stack: sync}, per: http.requests, max: 1%}
              - {metric: http.failures, labels: {stack: chat}, per: http.requests, max: 0.1}
              - {metric: http.failures, per: http.requests, max: 2%}
              - {metric: sync.requests, labels: {outcome: timeout}, per: {metric: sync.requests}, max: 5%}
              - {metric: network.bytes, labels: {stack: sync}, per: {metric: http.requests, labels: {stack: sync}}, max: 1024}
              - {metric: sync.requests, labels: {outcome: ok}, per: {metric: sync.requests}, min: 99%}
            """), recorder: Self.recorder())
        #expect(rows.map(\.passed) == [false, false, false, true, false, false])
        #expect(rows[0].message == "http.failures{stack=sync} per http.requests{stack=sync} = 1.20% (12 of 1,000) breaks <= 1.00%")
        #expect(rows[0].metric == "http.failures{stack=sync}" && rows[0].statistic == "per http.requests{stack=sync}")
        #expect(rows[0].observed == 0.012 && rows[0].bound == 0.01)
        #expect(rows[1].observed == 0.15 && rows[1].bound == 0.1, "a bare number is a fraction")
        #expect(rows[2].observed.map { abs($0 - 42.0 / 1_200) < 1e-12 } == true, "without labels, every stack: 42 of 1,200")
        #expect(rows[3].message == "sync.requests{outcome=timeout} per sync.requests = 4.04% (40 of 990) within <= 5.00%")
        #expect(rows[4].message == "network.bytes{stack=sync} per http.requests{stack=sync} = 1.5 KiB (1.4 MiB over 1,000) breaks <= 1.0 KiB")
        #expect(rows[5].op == ">=" && rows[5].observed.map { abs($0 - 950.0 / 990) < 1e-12 } == true)
    }

    @Test("nothing to divide by is not a pass")
    func nothingToDivideBy() throws {
        let rows = ThresholdEvaluator.evaluate(try Self.thresholds("""
              - {metric: http.failures, labels: {stack: agent}, per: http.requests, max: 1%}
              - {metric: agent.completed, per: agent.chats, min: 90%}
            """), recorder: Self.recorder())
        #expect(rows.map(\.passed) == [false, false])
        #expect(rows.allSatisfy { $0.observed == nil })
        #expect(rows[0].message == "http.failures{stack=agent} per http.requests{stack=agent} has nothing to divide by (0 of 0), so <= 1.00% cannot be shown")
    }

    @Test("a merge judges a ratio again from its results row, on the merged data")
    func fromResultsRow() throws {
        let written = try Self.thresholds("  - {metric: http.failures, labels: {stack: chat}, per: http.requests, max: 10%}")
        let row = try #require(ThresholdEvaluator.evaluate(written, recorder: Self.recorder()).first)
        let read = try #require(Threshold(result: row))
        #expect(read.per == ThresholdDenominator(metric: "http.requests", labels: ["stack": "chat"]))
        #expect(read.labels == ["stack": "chat"] && read.bound == .atMost(0.1) && read.statistic == .total)
        #expect(ThresholdEvaluator.evaluate([read], recorder: Self.recorder()) == [row])
    }

    @Test("a ratio that cannot be computed is refused when the scenario loads, saying why")
    func refusals() {
        let cases: [(String, String)] = [
            ("{metric: http.failures, per: http.request, max: 1%}", "unknown metric 'http.request'"),
            ("{metric: http.failures, per: sync.server_queue, max: 1%}", "sync.server_queue is a gauge"),
            ("{metric: battery.mean, per: http.requests, max: 1%}", "battery.mean is a gauge"),
            ("{metric: network.bytes, labels: {direction: up}, per: sync.requests, max: 10}",
             "sync.requests has no label 'direction' to divide by the same labels; give per as {metric: sync.requests, labels: {…}}"),
            ("{metric: sync.requests, labels: {outcome: ok}, per: sync.requests, max: 1%}", "sync.requests per itself is always 100%"),
            ("{metric: http.failures, per: http.requests, percentile: 99, max: 1%}", "leave out percentile and stat"),
            ("{metric: http.failures, per: http.requests, max: lots}", "expected a percentage like 1% or a fraction like 0.01, found 'lots'"),
            ("{metric: http.failures, per: {metric: http.requests, labels: {region: eu}}, max: 1%}", "http.requests has no label 'region'"),
        ]
        for (line, message) in cases {
            do {
                _ = try Self.thresholds("  - \(line)")
                Issue.record("accepted: \(line)")
            } catch {
                #expect("\(error)".contains(message), "\(line): \(error)")
            }
        }
    }
}
