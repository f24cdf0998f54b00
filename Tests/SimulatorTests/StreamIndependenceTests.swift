import DeviceWorkflows
import Foundation
import LabKernel
import LabTestSupport
import MobileSyncServer
import Orch8Wire
import SecureChatClient
import Testing
@testable import Simulator

/// Every random draw about a device comes from its own labelled stream, so a population
/// that joins the fleet changes nothing about the others: their phones, engines, syncs,
/// pushes, campaign picks, faults and chats are the same draw for draw.
@Suite("Streams: another population changes no device's stacks")
struct StreamIndependenceTests {
    static let base = """
        name: independence
        seed: 5
        duration: 2h
        startAt: "09:00"
        devices:
          - {name: phones, count: 40, power: typical, lifecycle: {preset: heavy, sessionsPerDay: 60}, network: flaky}
        workflows:
          run:
            - {sequence: payment-verification, devices: phones, start: {poisson: 20m}, input: {amount: 9}}
        sync:
          server: {workers: 64}
          operator: {thinkTime: {lognormal: {median: 30, sigma: 0.5}}}
          campaigns:
            - {at: 30m, sequence: payment-verification, devices: phones, fraction: 50%}
        push: {share: 60%, delay: {lognormal: {median: 1, sigma: 0.5}}, loss: 10%, duplication: 5%}
        chat:
          groups: 4
          groupSize: [3, 6]
          messagesPerUserHour: 20
          actions: {presencePerUserDay: 100, historyPerUserDay: 100}
        faults:
          - {kind: mass-app-kill, at: 1h, fraction: 30%}
          - {kind: radio-off, at: 70m, duration: 5m, fraction: 20%}
        """

    /// What a phone's stacks did: its model, its engine's instances, its sync client and
    /// the server's record of it, its chat client.
    struct PhoneFacts: Equatable {
        var ticks: UInt64
        var battery: Int64
        var instances: [String]
        var syncs: String
        var serverStatuses: [String]
        var pushToken: Bool
        var chat: String
    }

    static func facts(_ world: FleetWorld, population: String) -> [PhoneFacts] {
        let end = Instant.zero + .hours(2)
        return world.fleet.devices.indices.filter { world.fleet.deviceClass(of: $0).name == population }.map { device in
            let slot = world.workflows?.engines[device]
            let instances = (slot?.peek { $0.allInstances.map { "\($0.id) \($0.sequenceName) \($0.state)" } } ?? []).sorted()
            let client = slot?.syncClient
            let name = world.fleet.deviceName(device)
            let statuses = (world.sync?.server.state.statuses[name] ?? [:]).values.map { "\($0.instanceID) \($0.state)" }.sorted()
            let chatClient = world.chat?.clients[device]
            let stats = chatClient.flatMap { _ in world.chat?.totalStats(device) }.map { "\($0.decrypted) \($0.reconnects) \($0.refreshes)" } ?? "-"
            let lines = chatClient.map { c in c.snapshot.timelines.keys.sorted().map { c.timeline($0).count } } ?? []
            return PhoneFacts(ticks: world.fleet.devices[device].ticks.total, battery: world.fleet.devices[device].batteryLevel(at: end),
                              instances: instances, syncs: "\(client?.dueTick ?? 0) \(client?.failures ?? 0) \(slot?.lastSyncStart?.nanoseconds ?? 0)",
                              serverStatuses: statuses, pushToken: slot?.pushToken ?? false, chat: "\(stats) \(lines)")
        }
    }

    static func run(_ scenario: Scenario) async -> FleetWorld { await WorkflowSimulationTests.run(scenario) }

    @Test("a population of tablets added before the phones leaves every phone's device, workflows, sync, pushes and chat the same")
    func addedPopulation() async throws {
        let scenario = try ScenarioLoader.parse(text: Self.base, file: "independence.yaml",
                                                directory: TestPaths.packageRoot.appendingPathComponent("simulations").path)
        var widened = scenario
        widened.devices.insert(Population(name: "tablets", count: 25, power: PowerProfile.presets["heavy"]!,
                                          lifecycle: LifecycleProfile.presets["heavy"]!, network: NetworkProfile.presets["flaky"]!, stacks: []), at: 0)
        let alone = Self.facts(await Self.run(scenario), population: "phones")
        let beside = Self.facts(await Self.run(widened), population: "phones")
        #expect(alone.count == 40 && beside.count == 40)
        #expect(alone.contains { !$0.instances.isEmpty } && alone.contains { $0.pushToken } && alone.contains { $0.chat != "- []" },
                "the stacks really ran")
        for (index, (a, b)) in zip(alone, beside).enumerated() {
            #expect(a == b, "phone \(index) differs with the tablets beside it; seed 5")
        }
    }
}
