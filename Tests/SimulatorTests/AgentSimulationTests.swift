import AgentRuntimeClient
import AgentRuntimeServer
import Foundation
import Testing
import LabKernel
import LabStore
import LabTestSupport
@testable import Simulator

@Suite("Agent runtime simulation")
struct AgentSimulationTests {
    static let simulations = TestPaths.packageRoot.appendingPathComponent("simulations").path

    static func scenario(seed: UInt64 = 5, devices: Int = 90, hours: Int = 2, extra: String = "") throws -> Scenario {
        try ScenarioLoader.parse(text: """
            name: agents
            seed: \(seed)
            duration: \(hours)h
            startAt: "19:00"
            devices:
              - {name: phones, count: \(devices), lifecycle: heavy, network: flaky, stacks: [agent]}
            agent:
              workflows: {trip-planner: 60%, support-triage: 40%}
              chatsPerDeviceDay: 24
              thinkTime: {lognormal: {median: 4, sigma: 0.5}}
              toolThinkTime: {lognormal: {median: 3, sigma: 0.5}}
              uploadShare: 20%
            faults:
              - {kind: server-crash, server: agent, at: 20m, duration: 4m}
              - {kind: radio-off, at: 35m, duration: 3m, fraction: 50%}
              - {kind: mass-app-kill, at: 45m, fraction: 50%}
            \(extra)
            """, file: "agents.yaml", directory: simulations)
    }

    static func total(_ world: FleetWorld, _ name: String) -> Double { WorkflowSimulationTests.total(world, name) }

    @Test("phones chat with scripted agents through drops, kills and a runtime crash: every timeline is its transcript, applied in order")
    func chats() async throws {
        let world = await WorkflowSimulationTests.run(try Self.scenario())
        #expect(Self.total(world, "agent.chats") > 50 && Self.total(world, "agent.completed") > 20)
        #expect(Self.total(world, "agent.reconnects") > 0, "flaky links and the crash drop sockets")
        let agent = try #require(world.agent)
        let replayed = world.recorder.descriptors.first { $0.name == "agent.resume_replayed" }.flatMap { world.recorder.runHistograms[Int($0.id)] }
        #expect((replayed?.totalCount ?? 0) > 50 && (replayed?.value(atPercentile: 99) ?? 0) > 0, "resumes replay what the drops missed")
        for row in world.invariants.rows where row.name.hasPrefix("agent.") || row.name == "device.state_survives_relaunch" {
            #expect(row.checks > 0 && row.violations == 0, "\(row.name): \(row.firstViolation ?? ""); replay: fleetlab simulate with seed 5")
        }
        #expect(agent.server.state.uploads.count > 0 && agent.server.state.toolCalls.values.contains { $0.response != nil })
        // Every client's stored events are in index order, as the server numbered them.
        for (device, client) in agent.clients.sorted(by: { $0.key < $1.key }) {
            for chat in client.snapshot.chats.values {
                #expect(chat.lastIndex == chat.timeline.count - 1, "device \(device)")
                #expect(Array((agent.server.state.transcripts[chat.chatID] ?? []).prefix(chat.timeline.count)) == chat.timeline, "device \(device)")
            }
        }
    }

    @Test("the resume invariant holds over seeds with disconnect faults (fleetlab seeds simulations/agent-chats.yaml --count 500 runs more)",
          arguments: [11, 12, 13] as [UInt64])
    func seeds(seed: UInt64) async throws {
        let world = await WorkflowSimulationTests.run(try Self.scenario(seed: seed, devices: 40, hours: 1))
        for row in world.invariants.rows where row.violations > 0 {
            Issue.record("\(row.name): \(row.firstViolation ?? ""); replay: seed \(seed)")
        }
        #expect(Self.total(world, "agent.chats") > 10)
    }

    @Test("the same seed gives the same results database; another seed another")
    func determinism() async throws {
        let dir = TestPaths.scratchDirectory("agent-determinism")
        let scenario = try Self.scenario(devices: 40, hours: 1)
        let first = try await DeterminismTests.digest(of: scenario, in: dir, name: "a.sqlite")
        let second = try await DeterminismTests.digest(of: scenario, in: dir, name: "b.sqlite")
        #expect(first == second)
        #expect(try await DeterminismTests.digest(of: scenario.overriding(seed: 6), in: dir, name: "c.sqlite") != first)
    }

    @Test("a scenario names scripted workflows from the folder: an unknown one or a command backend is refused with the choices")
    func scenarioErrors() throws {
        func problem(_ workflows: String) -> String {
            do {
                _ = try ScenarioLoader.parse(text: """
                    name: x
                    seed: 1
                    duration: 1h
                    devices:
                      - {name: p, count: 1, stacks: [agent]}
                    agent:
                      workflows: \(workflows)
                    """, file: "x.yaml", directory: Self.simulations)
                return ""
            } catch { return error.description }
        }
        #expect(problem("{nope: 100%}").contains("no workflow 'nope'") && problem("{nope: 100%}").contains("trip-planner"))
        #expect(problem("{shell-echo: 100%}").contains("backend: command"))
        #expect(problem("{trip-planner: 0%}").contains("above 0%"))
    }
}
