import Foundation
import Testing
import LabKernel
import LabStore
import LabTestSupport
import SecureChatServer
import SecureChatClient
import ServerStorage
@testable import Simulator

@Suite("Chat simulation")
struct ChatSimulationTests {
    static func scenario(devices: Int = 60, hours: Int = 1, network: String = "typical") throws -> Scenario {
        try ScenarioLoader.parse(text: """
            name: chat
            seed: 4
            duration: \(hours)h
            devices:
              - {name: phones, count: \(devices), network: \(network)}
            chat:
              groups: 6
              groupSize: [3, 6]
              dmsPerUser: 1
              messagesPerUserHour: 20
            """, file: "chat.yaml")
    }

    static func total(_ world: FleetWorld, _ name: String, _ labels: String? = nil) -> Double { WorkflowSimulationTests.total(world, name, labels) }

    @Test("users on several devices talk in groups and DMs with real crypto: every invariant holds and nothing fails to decrypt")
    func talk() async throws {
        let world = await WorkflowSimulationTests.run(try Self.scenario(network: "flaky"))
        #expect(Self.total(world, "chat.messages", "kind=group") > 50 && Self.total(world, "chat.messages", "kind=dm") > 50)
        #expect(Self.total(world, "chat.decrypted") > 500)
        #expect(Self.total(world, "chat.decryption_failures") == 0)
        #expect(Self.total(world, "chat.reconnects") > 0, "flaky networks make devices reconnect")
        #expect(Self.total(world, "chat.typing") > 0, "typing.start reaches the other members' devices")
        let chat = world.invariants.rows.filter { $0.name.hasPrefix("chat.") }
        #expect(chat.count == 6)
        for row in chat { #expect(row.checks > 0 && row.violations == 0, "\(row.name): \(row.firstViolation ?? "")") }
        let sim = try #require(world.chat)
        #expect(sim.devicesOfUser.contains { $0.count > 1 }, "some users have several devices")
        #expect(!sim.server.state.messages.values.contains { $0.content.contains(".d") }, "the server holds no plaintext")
    }

    @Test("byHour shapes the rate: users are silent in hours weighted zero and talk in the others")
    func byHour() async throws {
        func messages(busyHour: Int) async throws -> Double {
            var scenario = try Self.scenario(devices: 40, hours: 2)
            scenario.startAt = .hours(8)
            scenario.chat!.byHour = (0..<24).map { $0 == busyHour ? 1 : 0 }
            scenario.chat!.messagesPerUserHour = 0.5  // a day's average: 12 an hour in the busy hour
            let world = await WorkflowSimulationTests.run(scenario)
            return Self.total(world, "chat.messages")
        }
        let silent = try await messages(busyHour: 20), busy = try await messages(busyHour: 9)
        #expect(silent == 0, "08:00-10:00 is silent when only 20:00 is busy")
        #expect(busy > 20)
    }

    @Test("chat runs repeat for a seed")
    func deterministic() async throws {
        let dir = TestPaths.scratchDirectory()
        let scenario = try Self.scenario(devices: 30)
        let first = try await DeterminismTests.digest(of: scenario, in: dir, name: "a.sqlite")
        let second = try await DeterminismTests.digest(of: scenario, in: dir, name: "b.sqlite")
        #expect(first == second)
    }

    @Test("chat settings are checked", arguments: [
        ("devicesPerUser: {1: 50%, 2: 20%}", "add up to 70%"),
        ("devicesPerUser: {4: 100%}", "keys are 1, 2 and 3"),
        ("groupSize: [1, 5]", "2 <= min <= max"),
        ("devices: tablets", "is their `stacks:` list now"),
        ("byHour: [1, 2]", "24 weights"),
    ])
    func settings(line: String, message: String) {
        let text = """
            name: chat
            seed: 4
            duration: 1h
            devices:
              - {name: phones, count: 10}
            chat:
              \(line)
            """
        #expect { try ScenarioLoader.parse(text: text, file: "chat.yaml") } throws: { "\($0)".contains(message) }
    }
}

@Suite("Chat simulation: devices come and go, users act")
struct ChatChurnSimulationTests {
    static func scenario(seed: UInt64 = 7, devices: Int = 60) throws -> Scenario {
        try ScenarioLoader.parse(text: """
            name: chat-churn
            seed: \(seed)
            duration: 4h
            devices:
              - {name: phones, count: \(devices), network: flaky}
            chat:
              devicesPerUser: {1: 20%, 2: 50%, 3: 30%}
              groups: 6
              groupSize: [3, 6]
              dmsPerUser: 1
              messagesPerUserHour: 12
              churn: {addsPerUserDay: 24, removesPerUserDay: 24}
              actions: {editShare: 10%, deleteShare: 5%, leavesPerUserDay: 12, historyPerUserDay: 24, presencePerUserDay: 24, logoutsPerUserDay: 12, logoutAllsPerUserDay: 4}
            """, file: "chat-churn.yaml")
    }

    @Test("phones are added and removed, users edit, delete, leave, log out: every member device decrypts, no removed one reads anything later")
    func churn() async throws {
        let world = await WorkflowSimulationTests.run(try Self.scenario())
        for kind in ["add_device", "remove_device", "edit", "delete", "leave", "rejoin", "history", "presence", "logout", "sign_in"] {
            #expect(ChatSimulationTests.total(world, "chat.actions", "kind=\(kind)") > 0, "\(kind)")
        }
        #expect(ChatSimulationTests.total(world, "chat.decryption_failures") == 0)
        // Logging out everywhere ends the user's other sessions at their request: none is lost.
        #expect(ChatSimulationTests.total(world, "chat.sessions_lost") == 0)
        let chat = world.invariants.rows.filter { $0.name.hasPrefix("chat.") }
        #expect(chat.count == 7)
        for row in chat { #expect(row.checks > 0 && row.violations == 0, "\(row.name): \(row.firstViolation ?? "")") }
    }

    @Test("the server's and the phones' history set aside in files (older messages, spent refresh tokens) gives the same run, byte for byte, as all of it in memory (edits, deletes, history pages, leaving and rejoining, logouts)")
    func historySetAside() async throws {
        let dir = TestPaths.scratchDirectory()
        var inMemory = try Self.scenario(devices: 40)
        inMemory.chat!.setsHistoryAside = false
        var setAside = inMemory
        setAside.chat!.messagesInMemoryPerChannel = 1
        setAside.chat!.setsHistoryAside = true
        let world = await WorkflowSimulationTests.run(setAside)
        let state = try #require(world.chat?.server.state)
        #expect(state.messages.count > 2 * state.messages.rows.count, "most messages were set aside")
        #expect(state.refreshTokens.count > 2 * state.refreshTokens.rows.count, "most refresh tokens were set aside")
        let clients = try #require(world.chat?.clients.values)
        let held = clients.reduce(0) { $0 + $1.snapshot.timelines.values.reduce(0) { $0 + $1.count } }
        #expect(clients.reduce(0) { $0 + $1.snapshot.messagesSetAside } > 2 * held, "most of the phones' messages were set aside")
        #expect(world.chat?.timelineArchive?.messageCount == clients.reduce(0) { $0 + $1.snapshot.messagesSetAside },
                "the file holds them, and none of the stores that signing in anew replaced")
        for kind in ["history", "edit", "delete", "logout", "sign_in"] { #expect(ChatSimulationTests.total(world, "chat.actions", "kind=\(kind)") > 0, "\(kind)") }
        let a = try await DeterminismTests.digest(of: inMemory, in: dir, name: "memory.sqlite")
        let b = try await DeterminismTests.digest(of: setAside, in: dir, name: "set-aside.sqlite")
        #expect(a == b)
    }

    @Test("the churn invariants hold over many seeds (a small fleet each; `fleetlab seeds` runs 200)", arguments: [11, 12, 13])
    func seeds(seed: UInt64) async throws {
        let world = await WorkflowSimulationTests.run(try Self.scenario(seed: seed, devices: 30))
        for row in world.invariants.rows where row.name.hasPrefix("chat.") {
            #expect(row.violations == 0, "seed \(seed), \(row.name): \(row.firstViolation ?? ""); replay: fleetlab simulate … --seed \(seed)")
        }
    }
}
