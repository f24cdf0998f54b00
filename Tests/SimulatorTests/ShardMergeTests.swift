import Foundation
import Testing
import LabKernel
import LabStore
import LabTestSupport
@testable import Simulator

@Suite("Shards and merge")
struct ShardMergeTests {
    static func scenario(stacks: String, extra: String = "") throws -> Scenario {
        let workflows = TestPaths.packageRoot.appendingPathComponent("simulations/workflows").path
        return try ScenarioLoader.parse(text: """
            name: shards
            seed: 21
            duration: 3h
            devices:
              - {name: phones, count: 50, stacks: \(stacks)}
              - {name: tablets, count: 23, power: light, lifecycle: light, network: flaky, stacks: \(stacks)}
            workflows:
              run:
                - {sequence: \(workflows)/payment-verification.json, start: {poisson: 20m}}
            faults:
              - {kind: mass-app-kill, at: 1h, fraction: 30%}
              - {kind: radio-off, at: 2h, duration: 10m, fraction: 20%}
            thresholds:
              - {metric: workflow.step_latency, percentile: 99, max: 10s}
              - {metric: battery.mean, stat: min, min: 5}
            \(extra)
            """, file: "shards.yaml")
    }

    /// Runs the scenario whole (shard nil) or as one shard, into `dir/name.sqlite`.
    static func run(_ scenario: Scenario, shard: FleetShard?, in dir: URL, name: String) async throws -> (path: String, results: RunResults) {
        var sliced = scenario
        sliced.shard = shard
        let path = dir.appendingPathComponent("\(name).sqlite").path
        let run = sliced
        let results = try await cpuBound {
            _ = try FleetRun(scenario: run, resultsPath: path).run()
            return try ResultsDatabase.open(at: path).load()
        }
        return (path, results)
    }

    static func write(_ results: RunResults, to path: String) throws -> ResultsDatabase {
        let database = try ResultsDatabase.create(at: path)
        try database.write(results.batch)
        try database.checkpoint()
        return try ResultsDatabase.open(at: path)
    }

    @Test("N shards merged are the single run: the same fleet digest, counters and histograms, for N = 2 and 3")
    func shardsEqualTheWhole() async throws {
        let dir = TestPaths.scratchDirectory("shards")
        let scenario = try Self.scenario(stacks: "[workflows]")
        let whole = try await Self.run(scenario, shard: nil, in: dir, name: "whole")
        let wholeDigest = try ResultsDigest.fleet(ResultsDatabase.open(at: whole.path))
        for count in [2, 3] {
            var shards: [(path: String, results: RunResults)] = []
            for index in 0..<count {
                shards.append(try await Self.run(scenario, shard: FleetShard(index: index, count: count), in: dir, name: "s\(index)of\(count)"))
            }
            #expect(shards.map(\.results.scenario.devices).reduce(0, +) == 73)
            let merged = try ShardMerge.merge(shards.reversed())
            let database = try Self.write(merged, to: dir.appendingPathComponent("merged\(count).sqlite").path)
            #expect(try ResultsDigest.fleet(database) == wholeDigest, "\(count) shards")
            #expect(merged.deviceClasses.map(\.count) == [50, 23])
            // Per-event checks add up to the whole run's; a check made once per run is made once per shard.
            for invariant in whole.results.invariants {
                let mine = try #require(merged.invariants.first { $0.name == invariant.name })
                #expect(mine.violations == invariant.violations)
                #expect(mine.checks == (invariant.name == "workflow.instances_accounted" ? Int64(count) : invariant.checks), "\(invariant.name)")
            }
            for (mine, theirs) in zip(merged.thresholds, whole.results.thresholds) {
                #expect(mine.passed == theirs.passed && abs((mine.observed ?? 0) - (theirs.observed ?? 0)) <= 1e-9 * abs(theirs.observed ?? 1), "\(mine.message)")
            }
            // Real-valued counters agree to rounding; gauges of device counts add up exactly.
            for metric in whole.results.metrics where metric.kind == .counter && metric.name != "sim.events" {
                let mine = whole.results.counterTotals[metric.id] ?? 0
                let theirs = merged.total(metric.name, labels: metric.labels) ?? 0
                #expect(abs(mine - theirs) <= 1e-9 * max(1, abs(mine)), "\(metric.name){\(metric.labels)}")
            }
            let devicesGauge = try #require(whole.results.metric(named: "devices.power_state", labels: "power_state=Unplugged"))
            let mergedGauge = try #require(merged.metric(named: "devices.power_state", labels: "power_state=Unplugged"))
            #expect(merged.series[mergedGauge.id]?.map(\.value) == whole.results.series[devicesGauge.id]?.map(\.value))
        }
    }

    @Test("with a sync server each shard runs its own; the merge re-evaluates thresholds on the merged histograms")
    func ownServersAndThresholds() async throws {
        let dir = TestPaths.scratchDirectory("shards")
        let scenario = try Self.scenario(stacks: "[workflows, sync]", extra: "sync: {server: {workers: 1}}")
        let shards = [try await Self.run(scenario, shard: FleetShard(index: 0, count: 2), in: dir, name: "a"),
                      try await Self.run(scenario, shard: FleetShard(index: 1, count: 2), in: dir, name: "b")]
        let merged = try ShardMerge.merge(shards)
        let latency = try #require(merged.metric(named: "http.latency", labels: "endpoint=POST /api/v1/mobile/sync,stack=sync"))
        let requests = shards.map { $0.results.histogram($0.results.metric(named: "http.latency", labels: latency.labels)!).totalCount }
        #expect(merged.histogram(latency).totalCount == requests.reduce(0, +))
        // Two servers, one per shard: utilisation is their mean, queues add.
        let utilisation = try #require(merged.metric(named: "sync.server_utilisation"))
        let each = shards.map { shard in shard.results.series[shard.results.metric(named: "sync.server_utilisation")!.id]!.first!.value }
        #expect(merged.series[utilisation.id]!.first!.value == (each[0] + each[1]) / 2)
        let p99 = try #require(merged.thresholds.first { $0.statistic == "p99" })
        let steps = merged.metrics(named: "workflow.step_latency").map { merged.histogram($0) }
        var all = steps[0]
        for h in steps.dropFirst() { all.merge(h) }
        #expect(p99.observed == Double(all.value(atPercentile: 99)))
    }

    @Test("a merge refuses an incomplete, mixed or repeated set of shards, and a whole run", arguments: [
        ("missing", "missing shard 1/3"), ("mixed", "is shard 0/2 but the others are of 3"), ("twice", "are both shard 0/3"), ("whole", "is not a shard's results"),
    ])
    func refusals(_ case: (name: String, message: String)) async throws {
        let dir = TestPaths.scratchDirectory("shards")
        let scenario = try Self.scenario(stacks: "[workflows]")
        let first = try await Self.run(scenario, shard: FleetShard(index: 0, count: 3), in: dir, name: "0of3")
        let third = try await Self.run(scenario, shard: FleetShard(index: 2, count: 3), in: dir, name: "2of3")
        var set = [first, third]
        switch `case`.name {
        case "mixed": set.append(try await Self.run(scenario, shard: FleetShard(index: 0, count: 2), in: dir, name: "0of2"))
        case "twice": set.append(first)
        case "whole": set = [try await Self.run(scenario, shard: nil, in: dir, name: "whole")]
        default: break
        }
        #expect {
            _ = try ShardMerge.merge(set)
        } throws: { error in
            (error as? ShardMerge.Failure)?.description.contains(`case`.message) == true
        }
    }

    @Test("a load test's generators are lined up by when each started, in whole buckets; a simulation's shards all start at zero")
    func loadTestStarts() throws {
        // Two generators of a 3 s load test with 1 s buckets, the second started 2.4 s later.
        func generator(_ index: Int, startedAt: Int64) -> (path: String, results: RunResults) {
            let scenario = ScenarioRow(name: "load", text: "name: load", sha256: "abc", seed: 4, startTimeOfDay: 0, durationNanoseconds: 3_000_000_000,
                                       bucketNanoseconds: 1_000_000_000, devices: 2, tickMode: "live")
            var results = RunResults(scenario: scenario)
            results.metrics = [MetricDescriptor(id: 0, name: "loadtest.iterations", labels: "outcome=ok", kind: .counter, unit: "count", description: "")]
            results.series[0] = [10.0, 20, 30].enumerated().map { SeriesPointRow(metricID: 0, bucketStart: Int64($0) * 1_000_000_000, value: $1) }
            results.counterTotals[0] = 60
            results.runMetadata = ["mode": "loadtest", "shard": "\(index)/2", "build": "b", "started_at_unix_ms": String(startedAt)]
            return ("g\(index)", results)
        }
        let merged = try ShardMerge.merge([generator(0, startedAt: 1_000), generator(1, startedAt: 3_400)])
        #expect(merged.series[0]?.map(\.bucketStart) == [0, 1, 2, 3, 4].map { Int64($0) * 1_000_000_000 })
        #expect(merged.series[0]?.map(\.value) == [10, 20, 40, 20, 30], "the second generator's first second is the run's third")
        #expect(merged.scenario.durationNanoseconds == 5_000_000_000 && merged.total("loadtest.iterations", labels: "outcome=ok") == 120)
        #expect(merged.runMetadata["mode"] == "loadtest")
        // Without the starts (a simulation's shards), nothing moves.
        var first = generator(0, startedAt: 0), second = generator(1, startedAt: 0)
        first.results.runMetadata["started_at_unix_ms"] = nil
        second.results.runMetadata["started_at_unix_ms"] = nil
        #expect(try ShardMerge.merge([first, second]).series[0]?.map(\.value) == [20, 40, 60])
    }

    @Test("shard slices are modulo the member number and parse as I/N")
    func slices() {
        #expect(FleetShard(parsing: "1/3").map { shard in (0..<7).filter(shard.includes) } == [1, 4])
        for bad in ["3/3", "-1/2", "1", "a/b", "0/0", "1/2/3"] { #expect(FleetShard(parsing: bad) == nil, "\(bad)") }
        #expect(GaugeMerge.rule(for: "battery.mean") == .deviceWeightedMean)
        #expect(GaugeMerge.deviceWeightedMean.combine([(50, 1), (80, 3)]) == 72.5)
        #expect(GaugeMerge.rule(for: "chat.server_utilisation") == .mean && GaugeMerge.rule(for: "devices.app_state") == .sum)
    }
}
