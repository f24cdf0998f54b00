import Foundation
import Testing
import LabKernel
import LabStore
import LabTestSupport
@testable import Simulator

/// Devices running the workflow engine: the engine works only on the device's ticks, dies
/// with the app and comes back from its store, and the people and handlers around it
/// follow the scenario's models.
@Suite("Workflow simulation")
struct WorkflowSimulationTests {
    static let workflows = TestPaths.packageRoot.appendingPathComponent("simulations/workflows").path

    /// A fleet whose apps die often (mass kill included), with slow, failing handlers, so
    /// kills land on handlers in flight and on people thinking.
    static func killingFleet(devices: Int = 120, hours: Int = 6, seed: UInt64 = 11) throws -> Scenario {
        try ScenarioLoader.parse(text: """
            name: wf
            seed: \(seed)
            duration: \(hours)h
            startAt: "08:00"
            bucket: 15m
            devices:
              - {name: heavy, count: \(devices * 2 / 3), power: heavy, lifecycle: {preset: heavy, userKill: 30%}, network: flaky}
              - {name: flat, count: \(devices - devices * 2 / 3), power: low-battery, lifecycle: typical, network: cellular}
            faults:
              - {kind: mass-app-kill, at: \(hours * 30)m, fraction: 50%}
            workflows:
              run:
                - sequence: \(workflows)/payment-verification.json
                  start: {poisson: 15m}
                  answers:
                    payment_approval: {choices: {approved: 80%, declined: 20%}, thinkTime: {constant: 20}, neverAnswer: 5%}
                - sequence: \(workflows)/feature-access.json
                  devices: heavy
                  start: {every: 30m}
              handlers:
                default: {duration: {lognormal: {median: 2, sigma: 0.5}}}
                fraud_check: {duration: {constant: 20}, failureRate: 20%}
              engine: {maxConcurrentInstances: 4, maxInstanceLifetime: 1h, maxTickDuration: 3s, instanceCost: 1500ms}
            """, file: "wf.yaml")
    }

    /// Runs a scenario to its end (off the cooperative pool, a core at a time: `cpuBound`).
    static func run(_ scenario: Scenario, mode: TickMode? = nil) async -> FleetWorld {
        var s = scenario
        if let mode { s.ticks.mode = mode }
        return try! await cpuBound { [s] in
            var kernel = Kernel(world: FleetWorld(scenario: s, sink: nil), queue: EventQueue())
            kernel.queue = kernel.world.initialEvents()
            _ = kernel.run(until: .time(.zero + s.duration))
            _ = kernel.world.finish(at: .zero + s.duration)
            return kernel.world
        }
    }

    static func total(_ world: FleetWorld, _ name: String, _ labels: String? = nil) -> Double {
        world.recorder.descriptors.filter { $0.name == name && (labels == nil || $0.labels == labels) }
            .reduce(0) { $0 + world.recorder.totals[$1.id] }
    }

    /// The per-bucket series of the first gauge named `name`.
    static func gauge(_ world: FleetWorld, _ name: String) throws -> [Double] {
        world.recorder.gaugeSeries[try #require(world.recorder.descriptors.first { $0.name == name }).id]
    }

    static func histogramCount(_ world: FleetWorld, _ name: String, _ labels: String) -> UInt64 {
        world.recorder.descriptors.filter { $0.name == name && $0.labels == labels }
            .reduce(0) { $0 + (world.recorder.runHistograms[$1.id]?.totalCount ?? 0) }
    }

    @Test("fast-forwarding idle ticks changes no workflow result: every counter and histogram equals executing every tick")
    func fastForwardIsExactWithWorkflows() async throws {
        let scenario = try Self.killingFleet(devices: 60, hours: 4)
        let fast = await Self.run(scenario, mode: .fastForward)
        let every = await Self.run(scenario, mode: .everyTick)
        var compared = 0
        for descriptor in fast.recorder.descriptors where descriptor.name.hasPrefix("workflow.") {
            #expect(fast.recorder.totals[descriptor.id] == every.recorder.totals[descriptor.id], "\(descriptor.name){\(descriptor.labels)}")
            #expect(fast.recorder.runHistograms[descriptor.id] == every.recorder.runHistograms[descriptor.id],
                    "\(descriptor.name){\(descriptor.labels)} distribution")
            compared += 1
        }
        #expect(compared > 30)
        #expect(Self.total(fast, "workflow.finished") > 100, "the fleet really ran workflows")
        // The point of fast-forwarding: the engine ran on the same ticks, the idle ones were counted.
        #expect(Self.total(fast, "workflow.engine_ticks") == Self.total(every, "workflow.engine_ticks"))
        let executed = fast.devices.reduce(UInt64(0)) { sum, d in PowerState.allCases.reduce(sum) { $0 + d.ticks.executed($1) } }
        let everyTotal = every.devices.reduce(UInt64(0)) { $0 + $1.ticks.total }
        #expect(executed * 20 < everyTotal, "fast-forward executed \(executed) of \(everyTotal) ticks")
    }

    @Test("every started instance finishes or is still active at the end, through kills, dead batteries and relaunches")
    func instancesAreAccounted() async throws {
        let world = await Self.run(try Self.killingFleet())
        #expect(world.invariants.allHold, "\(world.invariants.rows.filter { !$0.passed })")
        let started = Self.total(world, "workflow.started")
        let finished = Self.total(world, "workflow.finished")
        #expect(started > 500 && finished > 300)
        #expect(Self.total(world, "workflow.recoveries") > 20, "engines came back from their stores after kills")
        #expect(Self.total(world, "workflow.lost_handlers") > 5, "kills landed on handlers in flight")
        #expect(Self.total(world, "workflow.answers", "outcome=lost") > 0)
        #expect(Self.total(world, "workflow.retries") > 20, "fraud_check's 20% failures were retried")
        #expect(Self.total(world, "workflow.rejected", "reason=resource_limit") > 0, "maxConcurrentInstances 4 refused starts")
        // An interrupted step re-runs after the relaunch, so payments still complete.
        #expect(Self.total(world, "workflow.finished", "outcome=completed,sequence=payment-verification") > 100)
    }

    @Test("answers follow the scenario's choice probabilities")
    func answerProportions() async throws {
        let scenario = try ScenarioLoader.parse(text: """
            name: answers
            seed: 5
            duration: 8h
            startAt: "09:00"
            devices:
              - {name: users, count: 200, power: typical, lifecycle: {preset: heavy, userKill: 0%}, network: typical}
            workflows:
              run:
                - sequence: \(Self.workflows)/feature-access.json
                  start: {poisson: 10m}
                  answers:
                    consent_request: {choices: {granted: 30%, denied: 70%}, thinkTime: {constant: 1}}
              handlers:
                default: {duration: {constant: 0.01}}
            """, file: "answers.yaml")
        let world = await Self.run(scenario)
        let denied = Self.histogramCount(world, "workflow.step_latency", "sequence=feature-access,step=show_limited_access_banner")
        let granted = Self.histogramCount(world, "workflow.step_latency", "sequence=feature-access,step=verify_identity")
        let n = Double(denied + granted)
        #expect(n > 2_000, "\(n) consent answers")
        let share = Double(granted) / n
        #expect(abs(share - 0.30) < 0.03, "granted share \(share) of \(Int(n)); seed 5")
        #expect(Self.total(world, "workflow.answers", "outcome=never") == 0)
    }

    @Test("workflow results repeat for a seed and change with it")
    func workflowRunsAreDeterministic() async throws {
        let dir = TestPaths.scratchDirectory()
        func digest(_ scenario: Scenario, _ name: String) async throws -> String {
            try await DeterminismTests.digest(of: scenario, in: dir, name: name)
        }
        let scenario = try Self.killingFleet(devices: 40, hours: 3)
        let first = try await digest(scenario, "a.sqlite")
        let again = try await digest(scenario, "b.sqlite")
        let other = try await digest(scenario.overriding(seed: 12), "c.sqlite")
        #expect(again == first)
        #expect(other != first)
    }

    @Test("mistakes in the workflows section name the key and what is wrong", arguments: [
        ("answers: {nope: {thinkTime: {constant: 1}}}", "has no waiting step 'nope'; its waiting steps: payment_approval"),
        ("answers: {payment_approval: {choices: {maybe: 100%}}}", "'maybe' is not a choice of payment_approval; its choices: approved, declined"),
        ("answers: {payment_approval: {choices: {approved: 60%, declined: 30%}}}", "choice probabilities add up to 90%, not 100%"),
        ("start: {every: 0s}", "a start period is at least 1s"),
        ("start: {every: 1h, poisson: 1h}", "start is {every: 20m} or {poisson: 20m}"),
        ("start: {daily: 1}", "daily"),
        ("devices: [ghosts]", "no device population named 'ghosts'"),
        ("input: [1, 2]", "the input is a mapping"),
        ("colour: blue", "colour"),
    ])
    func workloadErrors(extra: String, message: String) throws {
        let start = extra.hasPrefix("start:") ? "" : "start: {poisson: 20m}"
        let error = try Self.refusal("""
              run:
                - sequence: \(Self.workflows)/payment-verification.json
                  \(start)
                  \(extra)
            """)
        #expect(error.contains(message), "\(error)")
        #expect(error.contains("workflows.run[0]"), "\(error)")
    }

    @Test("a handler model for a handler no sequence uses, or a sub-sequence nobody loads, is refused")
    func catalogErrors() throws {
        let typo = try Self.refusal("""
              run: [{sequence: \(Self.workflows)/payment-verification.json, start: {poisson: 20m}}]
              handlers: {fraud_chek: {failureRate: 10%}}
            """)
        #expect(typo.contains("no sequence of this scenario uses a handler named 'fraud_chek'"), "\(typo)")
        let missing = try Self.refusal("""
              run: [{sequence: \(Self.workflows)/examples/sub-sequence-kyc.json, start: {poisson: 20m}}]
            """)
        #expect(missing.contains("which is not loaded; list it under load:"), "\(missing)")
    }

    /// The error a one-device scenario with this `workflows:` body is refused with.
    static func refusal(_ workflows: String) throws -> String {
        let text = """
            name: bad
            seed: 1
            duration: 1h
            devices: [{name: users, count: 1}]
            workflows:
            \(workflows)
            """
        return try #require(throws: ScenarioError.self) { try ScenarioLoader.parse(text: text, file: "bad.yaml") }.description
    }
}
