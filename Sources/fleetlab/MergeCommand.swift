import ArgumentParser
import Foundation
import LabKernel
import LabStore
import Reports
import Simulator

struct MergeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "merge",
        abstract: "Merge the results of a sharded run (simulate or loadtest --shard I/N) into one database and dashboard.",
        discussion: """
        Counters add, histograms merge bucket by bucket (percentiles are exact), series align \
        by bucket, invariants add up and thresholds are evaluated again on the merged data. \
        Every shard of the run must be given, from the same scenario, seed and build.

        Exit status: 0 merged and every threshold and invariant held, 2 bad input (a missing \
        or foreign shard), 3 a threshold or invariant failed.
        """)

    @Argument(help: "The merged results.sqlite to write.")
    var output: String

    @Argument(help: "Each shard's results.sqlite.")
    var shards: [String]

    @Option(help: "Where to write the dashboard (default: dashboard.html beside the output).")
    var dashboard: String?

    @Option(help: "Write thresholds and invariants as JUnit XML to this file.")
    var junit: String?

    func run() throws {
        guard !shards.isEmpty else { throw CLIFailure.badInput("give every shard's results.sqlite after the output file") }
        let directory = (output as NSString).deletingLastPathComponent
        if !directory.isEmpty { try OutputPaths.prepareDirectory(directory) }
        let page = dashboard ?? (directory as NSString).appendingPathComponent("dashboard.html")
        for file in [output, page] + [junit].compactMap({ $0 }) { try OutputPaths.checkWritableFile(file) }
        guard !shards.contains(where: { URL(fileURLWithPath: $0).standardizedFileURL == URL(fileURLWithPath: output).standardizedFileURL }) else {
            throw CLIFailure.badInput("\(output) is one of the shards; write the merge to another file")
        }
        let started = WallClock.seconds()
        let loaded = try shards.map { path in
            do { return (path: path, results: try CompareCommand.open(path).load()) } catch let failure as CLIFailure { throw failure } catch {
                throw CLIFailure.badInput("\(path): \(error)")
            }
        }
        let merged: RunResults
        do { merged = try ShardMerge.merge(loaded) } catch { throw CLIFailure.badInput(error.description) }
        do {
            let database = try ResultsDatabase.create(at: output)
            try database.write(merged.batch)
            try database.checkpoint()
        } catch {
            throw CLIFailure.badInput("cannot write \(output): \(error)")
        }
        try OutputPaths.write(Dashboard.render(merged), to: page)
        let digest = try ResultsDigest.compute(ResultsDatabase.open(at: output))
        let n = { (v: Double) in MetricUnit.decimal(v, digits: 0) }
        // Load test shards whose targets refused every iteration fail merged as each did alone.
        let refused = merged.nothingSucceeded
        let passed = merged.thresholdsPassed && merged.invariantsPassed && !refused
        var lines = ["fleetlab merge \(merged.scenario.name) — \(shards.count) shards — \(passed ? "PASSED" : "FAILED")", ""]
        lines.append("  devices       \(n(Double(merged.scenario.devices))) (" + loaded.map { "shard \($0.results.runMetadata["shard"] ?? "?") \(n(Double($0.results.scenario.devices)))" }.joined(separator: ", ") + ")")
        lines.append("  wall time     " + loaded.map { MetricUnit.formatDuration(($0.results.runMetadata["wall_seconds"].flatMap(Double.init) ?? 0) * 1e9) }.joined(separator: ", ")
            + " per shard; merged in \(MetricUnit.formatDuration((WallClock.seconds() - started) * 1e9))")
        if refused { lines.append("  iterations    ✗ \(LoadtestSummary.nothingSucceededMessage)") }
        lines.append("  thresholds    \(merged.thresholds.filter(\.passed).count) of \(merged.thresholds.count) passed on the merged data")
        for t in merged.thresholds { lines.append("      \(t.passed ? "✓" : "✗") \(t.message)") }
        let broken = merged.invariants.filter { !$0.passed }
        lines.append("  invariants    " + (merged.invariants.isEmpty ? "none checked" : broken.isEmpty ? "\(merged.invariants.count) held over \(n(Double(merged.invariants.reduce(0) { $0 + $1.checks }))) checks"
            : "\(broken.count) of \(merged.invariants.count) violated: " + broken.map(\.name).joined(separator: ", ")))
        lines.append("  results       \(output)  (digest \(digest.prefix(16)))")
        lines.append("  dashboard     \(page)")
        let summary = lines.joined(separator: "\n")
        print(summary)
        if let junit {
            var report = JUnitReport.run(merged, wallSeconds: merged.runMetadata["wall_seconds"].flatMap(Double.init) ?? 0,
                                         timestamp: String(WallClock.timestamp().prefix(19)), summary: summary)
            report.cases += [LoadtestSummary.junitCase(merged)].compactMap { $0 }
            try OutputPaths.write(report.xml, to: junit)
        }
        if !passed { throw ExitCode(ExitStatus.checksFailed) }
    }
}
