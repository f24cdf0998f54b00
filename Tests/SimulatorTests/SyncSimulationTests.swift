import Foundation
import Testing
import LabKernel
import LabStore
import LabTestSupport
import MobileSyncServer
import ServerStorage
@testable import Simulator

/// Devices syncing with the real server core over the virtual network.
@Suite("Sync simulation")
struct SyncSimulationTests {
    static let workflows = TestPaths.packageRoot.appendingPathComponent("simulations/workflows").path

    static func fleet(devices: Int = 80, hours: Int = 3, seed: UInt64 = 3, faults: String = "",
                      server: String = "{workers: 2, serviceTime: 5ms}", campaign: String = "payment-verification",
                      retention: String = "{}") throws -> Scenario {
        try ScenarioLoader.parse(text: """
            name: sync
            seed: \(seed)
            duration: \(hours)h
            startAt: "10:00"
            bucket: 15m
            devices:
              - {name: busy, count: \(devices), power: heavy, lifecycle: {preset: heavy, sessionsPerDay: 90, appShare: 40%}, network: typical}
            workflows:
              run:
                - sequence: \(workflows)/payment-verification.json
                  start: {poisson: 20m}
              handlers:
                default: {duration: {constant: 0.05}}
            sync:
              server: \(server)
              retention: \(retention)
              operator:
                thinkTime: {lognormal: {median: 30, sigma: 0.5}}
                answers: {payment_approval: {choices: {approved: 80%, declined: 20%}}}
              campaigns:
                - {at: 30m, sequence: \(campaign), fraction: 50%, dedupKey: rollout, repeat: 3}
            faults: [\(faults)]
            """, file: "sync.yaml")
    }

    static func run(_ scenario: Scenario, mode: TickMode? = nil) async -> FleetWorld { await WorkflowSimulationTests.run(scenario, mode: mode) }

    static func total(_ world: FleetWorld, _ name: String, _ labels: String? = nil) -> Double {
        WorkflowSimulationTests.total(world, name, labels)
    }

    @Test("operators resolve what devices report: approvals reach the server and decisions come back, with every invariant held")
    func roundTrips() async throws {
        let world = await Self.run(try Self.fleet())
        #expect(world.invariants.allHold, "\(world.invariants.rows.filter { !$0.passed })")
        let created = Self.total(world, "sync.approvals_created"), resolved = Self.total(world, "sync.approvals_resolved")
        #expect(created > 100 && resolved > created * 0.9, "\(created) created, \(resolved) resolved")
        #expect(Self.total(world, "sync.commands", "outcome=applied") > resolved * 0.8)
        let roundTrip = try #require(world.recorder.descriptors.first { $0.name == "sync.approval_round_trip" })
        #expect((world.recorder.runHistograms[roundTrip.id]?.totalCount ?? 0) > 50)
        // The rollout was sent three times with one dedup key; each phone ran it once.
        #expect(world.invariants.rows.first { $0.name == "workflow.no_duplicate_dedup_instances" }.map { $0.checks > 0 } == true)
        // Devices sync on their own cadence: 30 s at rest, 5 s with commands pending.
        let interval = try #require(world.recorder.descriptors.first { $0.name == "sync.interval" && $0.labels == "power_state=Unplugged" })
        let p50 = world.recorder.runHistograms[interval.id]?.value(atPercentile: 50) ?? 0
        #expect(p50 >= 4_000_000_000 && p50 <= 40_000_000_000, "median interval \(Double(p50) / 1e9) s")
    }

    @Test("the server's retention bounds what it keeps, not what the fleet does: an hour's retention keeps a fraction of the rows, with the same results")
    func retentionBoundsTheServer() async throws {
        let kept = await Self.run(try Self.fleet(devices: 40, hours: 4))
        let short = await Self.run(try Self.fleet(devices: 40, hours: 4, retention: "{acknowledgedCommands: 1h, closedApprovals: 1h}"))
        // Rows in memory and set aside in the server's archive.
        func held(_ world: FleetWorld) throws -> (approvals: Int, commands: Int) {
            let sync = try #require(world.sync), archive = try #require(sync.archive)
            return (sync.server.state.approvals.count + archive.counts.approvals, sync.server.state.commands.count + archive.counts.commands)
        }
        let keptRows = try held(kept), shortRows = try held(short)
        #expect(keptRows.approvals > 100 && shortRows.approvals < keptRows.approvals / 2, "\(shortRows.approvals) of \(keptRows.approvals) approvals kept")
        #expect(shortRows.commands < keptRows.commands / 2, "\(shortRows.commands) of \(keptRows.commands) commands kept")
        let newest = try #require(kept.sync?.archive?.oldestApprovals(.max, tenant: nil, state: nil).map(\.createdAtMs).max())
        let oldestClosed = try #require(short.sync?.archive?.oldestApprovals(1, tenant: nil, state: nil).first?.createdAtMs)
        #expect(oldestClosed >= newest - 2 * 3_600_000, "no closed approval older than the retention and a sweep")
        for descriptor in kept.recorder.descriptors {
            #expect(kept.recorder.totals[descriptor.id] == short.recorder.totals[descriptor.id], "\(descriptor.name){\(descriptor.labels)}")
        }
        #expect(short.invariants.allHold)
    }

    @Test("the server's finished rows set aside in a file (ended instances' statuses, closed approvals, acknowledged commands) give the same run, byte for byte, as all of them in memory, retention's sweeps included")
    func historySetAside() async throws {
        let dir = TestPaths.scratchDirectory()
        var inMemory = try Self.fleet(devices: 40, hours: 4, retention: "{acknowledgedCommands: 1h, closedApprovals: 1h}")
        inMemory.sync!.setsHistoryAside = false
        var setAside = inMemory
        setAside.sync!.setsHistoryAside = true
        let world = await Self.run(setAside)
        let sync = try #require(world.sync), archive = try #require(sync.archive)
        let counts = archive.counts
        #expect(counts.approvals > 2 * sync.server.state.approvals.count, "most approvals were set aside: \(counts)")
        #expect(counts.commands > 2 * sync.server.state.commands.count && counts.statuses > 2 * sync.server.state.statuses.values.reduce(0) { $0 + $1.count })
        #expect(world.invariants.allHold)
        let a = try await DeterminismTests.digest(of: inMemory, in: dir, name: "memory.sqlite")
        let b = try await DeterminismTests.digest(of: setAside, in: dir, name: "set-aside.sqlite")
        #expect(a == b)
    }

    @Test("fast-forwarding idle ticks changes no sync result: every counter and histogram equals executing every tick")
    func fastForwardIsExact() async throws {
        let scenario = try Self.fleet(devices: 30, hours: 2)
        let fast = await Self.run(scenario, mode: .fastForward)
        let every = await Self.run(scenario, mode: .everyTick)
        var compared = 0
        for descriptor in fast.recorder.descriptors where descriptor.name.hasPrefix("sync.") || descriptor.name.hasPrefix("workflow.") {
            let a = fast.recorder.totals[descriptor.id], b = every.recorder.totals[descriptor.id]
            #expect(a == b, "\(descriptor.name){\(descriptor.labels)}: \(a) vs \(b)")
            let h = fast.recorder.runHistograms[descriptor.id], k = every.recorder.runHistograms[descriptor.id]
            let same = h == k
            #expect(same, "\(descriptor.name){\(descriptor.labels)} distribution: \(h?.totalCount ?? 0) vs \(k?.totalCount ?? 0) samples")
            compared += 1
        }
        #expect(compared > 40 && Self.total(fast, "sync.requests", "outcome=ok") > 500)
    }

    @Test("a partition, a server crash and a push outage show as failures, and everything is delivered once they end")
    func outages() async throws {
        let scenario = try Self.fleet(devices: 60, hours: 3, faults: """
            {kind: partition, at: 1h, duration: 15m, fraction: 50%},
            {kind: server-crash, at: 1h30m, duration: 10m},
            {kind: push-outage, at: 2h, duration: 20m},
            {kind: mass-app-kill, at: 2h10m, fraction: 30%}
            """)
        let world = await Self.run(scenario)
        #expect(world.invariants.allHold, "\(world.invariants.rows.filter { !$0.passed })")
        let timeouts = Self.total(world, "sync.requests", "outcome=timeout"), unreachable = Self.total(world, "sync.requests", "outcome=unreachable")
        #expect(timeouts > 20, "the crash and the partition leave requests unanswered")
        #expect(unreachable > 20, "the partition leaves requests without a route")
        #expect(Self.total(world, "push.notifications", "outcome=outage,stack=sync") > 0)
        // Each request has one outcome (a partitioned one is unreachable, not a timeout too),
        // apart from those a killed app never heard back about; the ones that got no answer
        // are the sync endpoint's http.failures, as in a load test.
        let endpoint = "endpoint=POST /api/v1/mobile/sync,stack=sync"
        let requests = Self.total(world, "http.requests", endpoint), outcomes = Self.total(world, "sync.requests")
        #expect(outcomes <= requests && outcomes > requests * 0.95, "\(outcomes) outcomes of \(requests) requests")
        #expect(Self.total(world, "http.failures", endpoint) == timeouts + unreachable)
        let outbox = try #require(world.recorder.descriptors.first { $0.name == "sync.outbox_depth" })
        let series = world.recorder.gaugeSeries[outbox.id]
        let peak = series.max() ?? 0
        #expect(peak > (series.last ?? 0), "the outbox grows in the outage and drains after it: \(series)")
    }

    @Test("a slow server queues requests: utilisation and waits rise with load")
    func queueing() async throws {
        let light = await Self.run(try Self.fleet(devices: 40, hours: 1, server: "{workers: 4, serviceTime: 2ms}"))
        let heavy = await Self.run(try Self.fleet(devices: 40, hours: 1, server: "{workers: 1, serviceTime: 900ms}"))
        func utilisation(_ world: FleetWorld) -> Double {
            let metric = world.recorder.descriptors.first { $0.name == "sync.server_utilisation" }!
            let values = world.recorder.gaugeSeries[metric.id]
            return values.reduce(0, +) / Double(max(1, values.count))
        }
        func wait(_ world: FleetWorld) -> UInt64 {
            let metric = world.recorder.descriptors.first { $0.name == "sync.server_wait" }!
            return world.recorder.runHistograms[metric.id]?.value(atPercentile: 90) ?? 0
        }
        #expect(utilisation(heavy) > 5 * utilisation(light), "\(utilisation(heavy)) vs \(utilisation(light))")
        #expect(wait(heavy) > 100 * max(1, wait(light)))
    }

    @Test("sync runs repeat for a seed")
    func deterministic() async throws {
        let dir = TestPaths.scratchDirectory()
        func digest(_ scenario: Scenario, _ name: String) async throws -> String {
            try await DeterminismTests.digest(of: scenario, in: dir, name: name)
        }
        let scenario = try Self.fleet(devices: 30, hours: 1, faults: "{kind: server-crash, at: 20m, duration: 5m}")
        let first = try await digest(scenario, "a.sqlite"), second = try await digest(scenario, "b.sqlite")
        #expect(first == second)
    }

    @Test("a server-slowdown stretches the sync server's service times for its window: the queue and latency rise, the run before it is untouched")
    func brownout() async throws {
        let calm = await Self.run(try Self.fleet(devices: 40, hours: 1))
        let slow = await Self.run(try Self.fleet(devices: 40, hours: 1, faults: "{kind: server-slowdown, at: 20m, duration: 15m, factor: 100}"))
        func p99(_ world: FleetWorld, _ name: String) throws -> UInt64 {
            let descriptor = try #require(world.recorder.descriptors.first { $0.name == name })
            return try #require(world.recorder.runHistograms[descriptor.id]).value(atPercentile: 99)
        }
        // 15-minute buckets: the first ends before the slowdown starts, so it is the calm
        // run's to the last figure; the two it spans carry the load.
        let (calmBusy, slowBusy) = (try WorkflowSimulationTests.gauge(calm, "sync.server_utilisation"), try WorkflowSimulationTests.gauge(slow, "sync.server_utilisation"))
        #expect(calmBusy.count == 4 && slowBusy.count == 4)
        #expect(calmBusy[0] == slowBusy[0])
        #expect(slowBusy[1] > 10 * calmBusy[1] && slowBusy[2] > 10 * calmBusy[2], "\(calmBusy) against \(slowBusy)")
        #expect(slowBusy[3] < slowBusy[2], "the server recovers after the window: \(slowBusy)")
        // Two workers at 500 ms a request fall behind 40 busy phones: requests wait.
        let (calmLatency, slowLatency) = (try p99(calm, "http.latency"), try p99(slow, "http.latency"))
        #expect(slowLatency > 5 * calmLatency && slowLatency > 1_000_000_000, "p99 \(calmLatency) ns calm, \(slowLatency) ns slowed")
        #expect(try p99(slow, "sync.server_wait") > 500_000_000)
        #expect(slow.invariants.allHold, "\(slow.invariants.rows.filter { !$0.passed })")
        let faults = try #require(slow.recorder.descriptors.first { $0.name == "faults.active" && $0.labels == "kind=server-slowdown" },
                                  "the window is recorded under its kind")
        #expect(slow.recorder.gaugeSeries[faults.id] == [0, 1, 1, 0])
    }

    @Test("sync settings are checked: faults that need sync, campaigns of unknown sequences")
    func settingsErrors() throws {
        let noSync = """
            name: x
            seed: 1
            duration: 1h
            devices: [{name: a, count: 1}]
            faults: [{kind: server-crash, at: 10m, duration: 1m}]
            """
        let error = try #require(throws: ScenarioError.self) { try ScenarioLoader.parse(text: noSync, file: "x.yaml") }
        #expect(error.description.contains("a server-crash fault needs a population that runs sync"))
        let slowdowns = [("{kind: server-slowdown, at: 10m, duration: 5m}", "factor"),
                         ("{kind: server-slowdown, at: 10m, duration: 5m, factor: 1}", "more than 1 and at most 1000"),
                         ("{kind: server-slowdown, at: 10m, duration: 5m, factor: 5, fraction: 50%}", "'fraction' does not apply to a server-slowdown fault"),
                         ("{kind: server-crash, at: 10m, duration: 5m, factor: 5}", "'factor' does not apply to a server-crash fault"),
                         ("{kind: server-slowdown, at: 10m, duration: 5m, factor: 5, server: workflows}", "expected sync, chat, agent or ai-bridge"),
                         ("{kind: server-errors, at: 10m, duration: 5m}", "a server-errors fault needs the share of requests it fails"),
                         ("{kind: server-errors, at: 10m, duration: 5m, fraction: 5%, factor: 2}", "'factor' does not apply to a server-errors fault"),
                         ("{kind: link-slowdown, at: 10m, duration: 5m, factor: 5, link: 5g}", "unknown link '5g'; expected wifi, cellular or datacenter"),
                         ("{kind: link-slowdown, at: 10m, duration: 5m, factor: 5000, link: wifi}", "more than 1 and at most 1000"),
                         ("{kind: link-slowdown, at: 10m, duration: 5m, factor: 5, link: wifi, server: sync}", "'server' does not apply to a link-slowdown fault")]
        for (fault, message) in slowdowns {
            let error = try #require(throws: ScenarioError.self) { try Self.fleet(faults: fault) }
            #expect(error.description.contains(message), "\(fault): \(error)")
        }
        let badCampaign = try #require(throws: ScenarioError.self) {
            try Self.fleet(campaign: "onboarding-flow")
        }
        #expect(badCampaign.description.contains("campaign sequence 'onboarding-flow' is not run by any workload"), "\(badCampaign)")
    }
}
