import ArgumentParser
import Foundation
import LabKernel
import LabStore
import Reports
import Simulator

struct CompareCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "compare",
        abstract: "Compare two results databases: every figure side by side, a verdict, an HTML page.",
        discussion: """
        Runs are deterministic, so every difference is real. A figure regresses when it moves \
        in its worse direction (latency, failures and energy up; battery and finished work \
        down); the verdict fails when a judged figure regresses by more than --max-regression, \
        a --metric limit is passed, or the candidate fails one of its own thresholds or \
        invariants. Two runs with equal digests are reported as identical.

        Exit status: 0 within limits (or identical), 2 bad input, 3 past a limit \
        (or not identical with --expect-identical).
        """)

    @Argument(help: "The baseline results.sqlite.")
    var baseline: String

    @Argument(help: "The candidate results.sqlite.")
    var candidate: String

    @Option(help: "Where to write the HTML page (default: compare.html beside the candidate).")
    var out: String?

    @Option(name: .customLong("max-regression"), help: "Largest regression allowed on a judged figure, e.g. 5% (\"off\" judges only --metric limits).")
    var maxRegression = "5%"

    @Option(name: .customLong("metric"), help: "A limit on named figures, NAME=LIMIT, e.g. http.latency:p99=10% or sync.interval{power_state=Low}=20% (repeatable).")
    var metrics: [String] = []

    @Option(name: .customLong("min-samples"), help: "Percentiles resting on fewer samples in either run are shown, not judged.")
    var minSamples = 100

    @Flag(name: .customLong("expect-identical"), help: "Fail (exit 3) unless the digests are equal: a gate that any behaviour change must update its baseline.")
    var expectIdentical = false

    @Option(help: "Write the checks as JUnit XML to this file.")
    var junit: String?

    @Option(help: "Write the comparison as JSON to this file.")
    var json: String?

    func run() throws {
        let policy = try parsePolicy()
        let page = out ?? ((candidate as NSString).deletingLastPathComponent as NSString).appendingPathComponent("compare.html")
        for file in [page] + [junit, json].compactMap({ $0 }) { try OutputPaths.checkWritableFile(file) }
        let (before, beforeDigest) = try Self.load(baseline)
        let (after, afterDigest) = try Self.load(candidate)
        let comparison = RunComparison(baseline: before, baselinePath: baseline, baselineDigest: beforeDigest,
                                       candidate: after, candidatePath: candidate, candidateDigest: afterDigest, policy: policy)
        try OutputPaths.write(ComparisonPage.render(comparison), to: page)
        var summary = comparison.summary(htmlPath: page)
        if expectIdentical && !comparison.identical {
            summary += "\n  identity    the digests differ and --expect-identical was given: behaviour changed; if that is intended,"
                + "\n              replace the baseline with the candidate and put this output in the commit message"
        }
        print(summary)
        if let junit {
            let report = JUnitReport.comparison(comparison, expectIdentical: expectIdentical, timestamp: String(WallClock.timestamp().prefix(19)), summary: summary)
            try OutputPaths.write(report.xml, to: junit)
        }
        if let json { try OutputPaths.write(SummaryJSON.comparison(comparison).prettyText + "\n", to: json) }
        if !comparison.passed || (expectIdentical && !comparison.identical) { throw ExitCode(ExitStatus.checksFailed) }
    }

    func parsePolicy() throws -> ComparisonPolicy {
        var policy = ComparisonPolicy(minSamples: max(0, minSamples))
        if maxRegression == "off" {
            policy.maxRegression = nil
        } else {
            guard maxRegression.hasSuffix("%"), let percent = Double(maxRegression.dropLast()), percent >= 0, percent.isFinite else {
                throw CLIFailure.badInput("--max-regression \(maxRegression): expected a percentage like 5% or \"off\"")
            }
            policy.maxRegression = percent / 100
        }
        do {
            policy.limits = try metrics.map { text throws(MetricLimitError) in try MetricLimit(parsing: text) }
        } catch {
            throw CLIFailure.badInput(error.description)
        }
        return policy
    }

    static func load(_ path: String) throws -> (RunResults, String) {
        let database = try open(path)
        do { return (try database.load(), try ResultsDigest.compute(database)) } catch { throw CLIFailure.badInput("\(path): \(error)") }
    }

    /// A results database given on the command line; a clear message when it is not one.
    static func open(_ path: String) throws -> ResultsDatabase {
        guard FileManager.default.fileExists(atPath: path) else { throw CLIFailure.badInput("\(path): no such file") }
        do { return try ResultsDatabase.open(at: path) } catch { throw CLIFailure.badInput("\(path): \(error)") }
    }
}
