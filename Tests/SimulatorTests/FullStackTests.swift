import Foundation
import Testing
import LabKernel
import LabStore
import LabTestSupport
import SecureChatClient
@testable import Simulator

/// Phones that run every stack at once: they share the app's lifecycle, its radio and its
/// battery.
@Suite("Full stack on one phone")
struct FullStackTests {
    static let workflows = TestPaths.packageRoot.appendingPathComponent("simulations/workflows").path

    static func fullStack(devices: Int = 40, hours: Int = 2, kill: String = "") throws -> Scenario {
        try ScenarioLoader.parse(text: """
            name: full
            seed: 9
            duration: \(hours)h
            startAt: "10:00"
            devices:
              - {name: phones, count: \(devices), lifecycle: {preset: heavy, sessionsPerDay: 120, appShare: 50%}, stacks: [workflows, sync, chat]}
            workflows:
              run:
                - {sequence: \(workflows)/payment-verification.json, start: {poisson: 15m}}
            sync:
              operator: {thinkTime: 20}
            chat:
              groups: 4
              groupSize: [3, 6]
              messagesPerUserHour: 12
            push: {share: 100%, loss: 0%}
            faults:
            \(kill)
            """, file: "full.yaml")
    }

    @Test("an app killed with every stack running comes back with each one restored: the engine's instances, the chat client's messages and sends, and both carry on")
    func killedDeviceRestoresEveryStack() async throws {
        let killAt = Instant.zero + .minutes(50)
        let scenario = try Self.fullStack(kill: "  - {kind: mass-app-kill, at: 50m, fraction: 100%}")
        typealias Stored = (instances: Int, chat: Int, launches: UInt64)
        let (killed, stored, after) = try await cpuBound { () -> ([Int], [Int: Stored], FleetWorld) in
            var kernel = Kernel(world: FleetWorld(scenario: scenario, sink: nil), queue: EventQueue())
            kernel.queue = kernel.world.initialEvents()
            _ = kernel.run(until: .time(killAt + .milliseconds(1)))
            let world = kernel.world
            let killed = world.fleet.devices.indices.filter { world.fleet.devices[$0].app == .killed }
            // Read now: engine slots are shared objects the rest of the run changes.
            let stored = Dictionary(uniqueKeysWithValues: killed.map { device in
                (device, (instances: world.workflows!.storedInstances(device), chat: world.chat!.storedFacts(device).messages,
                          launches: world.workflows!.engines[device]!.launches))
            })
            _ = kernel.run(until: .time(.zero + scenario.duration))
            _ = kernel.world.finish(at: .zero + scenario.duration)
            return (killed, stored, kernel.world)
        }
        #expect(killed.count > 10, "the kill found running apps")
        #expect(stored.values.contains { $0.instances > 0 } && stored.values.contains { $0.chat > 0 }, "the stacks had stored something")

        let relaunched = killed.filter { after.workflows!.engines[$0]!.launches > stored[$0]!.launches }
        #expect(relaunched.count > 5, "killed apps were launched again")
        // (An engine forgets finished instances after their lifetime, so its count is
        // compared at the relaunch itself: `device.state_survives_relaunch` below.)
        for device in relaunched {
            #expect(after.chat!.storedFacts(device).messages >= stored[device]!.chat, "device \(device): the chat client lost messages")
        }
        // Both stacks went on after the relaunch: chat read what was sent after the kill,
        // and engines finished instances they had before it.
        let readAfter = relaunched.filter { device in
            let client = after.chat!.clients[device]!
            return client.snapshot.channels.keys.contains { channel in
                client.timeline(channel).contains { (after.chat!.sent.sentAt(ChatStack.original($0.text)) ?? .zero) > killAt }
            }
        }
        #expect(!readAfter.isEmpty, "relaunched chat clients caught up with what was sent after the kill")
        #expect(WorkflowSimulationTests.total(after, "workflow.recoveries") > 0, "engines came back from their stores with instances in flight")
        let row = try #require(after.invariants.rows.first { $0.name == "device.state_survives_relaunch" })
        #expect(row.checks >= UInt64(relaunched.count) && row.violations == 0, "\(row.firstViolation ?? "")")
        for row in after.invariants.rows { #expect(row.violations == 0, "\(row.name): \(row.firstViolation ?? "")") }
    }

    @Test("a push wakes a phone in the background: chat fetches what its channels got without a socket, and connects once the app is on screen")
    func pushCatchUp() async throws {
        let scenario = try Self.fullStack()
        let (seen, fetched, connected) = try await cpuBound { () -> (Int, Int, Int) in
            var kernel = Kernel(world: FleetWorld(scenario: scenario, sink: nil), queue: EventQueue())
            kernel.queue = kernel.world.initialEvents()
            var seen = 0, fetched = 0, connected = 0
            var held: [Int: Int] = [:]  // messages held by each phone catching up, last look
            var now = Instant.zero
            while now < .zero + scenario.duration {
                now = now + .seconds(5)
                _ = kernel.run(until: .time(now))
                let (chat, devices) = (kernel.world.chat!, kernel.world.fleet.devices)
                for device in chat.catchingUp.sorted() {
                    seen += 1
                    #expect(chat.connectionOf[device] == nil && devices[device].app != .foreground, "device \(device) at \(now)")
                    let count = chat.clients[device]!.snapshot.messageCount
                    if let before = held[device], count > before { fetched += 1 }
                    held[device] = count
                }
                for device in held.keys.sorted() where !chat.catchingUp.contains(device) {
                    if devices[device].app == .foreground && chat.connectionOf[device] != nil { connected += 1 }
                    held[device] = nil
                }
            }
            return (seen, fetched, connected)
        }
        #expect(seen > 50, "pushes opened background windows")
        #expect(fetched > 0, "phones in a push's window decrypted what their channels got")
        #expect(connected > 0, "a phone opened during a push's window connected its socket")
    }

    /// Kiosks on cellular that sync all day; only the cadence the server asks for differs.
    static func syncing(every interval: String) throws -> Scenario {
        try ScenarioLoader.parse(text: """
            name: cadence
            seed: 3
            duration: 3h
            startAt: "10:00"
            devices:
              - {name: kiosks, count: 30, lifecycle: kiosk, network: cellular, power: {preset: typical, initialLevel: 90, topUpsPerDay: 0}, stacks: [workflows, sync]}
            workflows:
              run:
                - {sequence: \(workflows)/payment-verification.json, start: {poisson: 30m}}
            sync:
              interval: {idle: \(interval), active: 5s}
            """, file: "cadence.yaml")
    }

    /// The p99 of a stack's slowest endpoint over the run.
    static func slowestP99(_ world: FleetWorld, stack: String) -> UInt64 {
        world.recorder.descriptors.filter { $0.name == "http.latency" && $0.labels.contains("stack=\(stack)") }
            .compactMap { world.recorder.runHistograms[$0.id]?.value(atPercentile: 99) }.max() ?? 0
    }

    @Test("a server-slowdown names its server: the chat server's brownout fills its workers, and the fleet's run before it is unchanged")
    func slowdownHitsItsServer() async throws {
        let calm = await WorkflowSimulationTests.run(try Self.fullStack())
        let slow = await WorkflowSimulationTests.run(try Self.fullStack(kill: "  - {kind: server-slowdown, server: chat, at: 30m, duration: 30m, factor: 500}"))
        let bucket = try Self.fullStack().bucket
        let before = Int(TimeSpan.minutes(30).nanoseconds / bucket.nanoseconds)
        let (calmChat, slowChat) = (try WorkflowSimulationTests.gauge(calm, "chat.server_utilisation"), try WorkflowSimulationTests.gauge(slow, "chat.server_utilisation"))
        #expect(Array(calmChat.prefix(before)) == Array(slowChat.prefix(before)))
        #expect(slowChat.max()! > 10 * calmChat.max()!, "\(calmChat) against \(slowChat)")
        // Each request holds a worker for a second instead of two milliseconds: the chat
        // endpoints' slowest answers show it.
        let (calmP99, slowP99) = (Self.slowestP99(calm, stack: "chat"), Self.slowestP99(slow, stack: "chat"))
        #expect(slowP99 > calmP99 + 500_000_000, "p99 \(calmP99) ns calm, \(slowP99) ns slowed")
        #expect(slow.invariants.allHold, "\(slow.invariants.rows.filter { !$0.passed })")
    }

    @Test("a server-errors fault fails its share of each named server's requests with 503s: the phones retry through it, every invariant holds, the run before it is unchanged")
    func failingServers() async throws {
        let calm = await WorkflowSimulationTests.run(try Self.fullStack())
        let failing = await WorkflowSimulationTests.run(try Self.fullStack(kill: """
              - {kind: server-errors, server: sync, at: 30m, duration: 30m, fraction: 50%}
              - {kind: server-errors, server: chat, at: 30m, duration: 30m, fraction: 50%}
            """))
        #expect(ChatSimulationTests.total(calm, "sync.requests", "outcome=refused") == 0)
        #expect(ChatSimulationTests.total(failing, "sync.requests", "outcome=refused") > 20)
        let failures = { (world: FleetWorld, stack: String) in
            world.recorder.descriptors.filter { $0.name == "http.failures" && $0.labels.contains("stack=\(stack)") }.reduce(0) { $0 + world.recorder.totals[$1.id] }
        }
        #expect(failures(failing, "chat") > failures(calm, "chat") + 20, "chat 503s: \(failures(calm, "chat")) calm, \(failures(failing, "chat")) failing")
        let bucket = try Self.fullStack().bucket
        let before = Int(TimeSpan.minutes(30).nanoseconds / bucket.nanoseconds)
        for name in ["sync.outbox_depth", "chat.server_utilisation"] {
            #expect(Array(try WorkflowSimulationTests.gauge(calm, name).prefix(before)) == Array(try WorkflowSimulationTests.gauge(failing, name).prefix(before)), "\(name)")
        }
        // What was refused was sent again: every message still reaches every member's
        // device, every approval the engine exactly once.
        #expect(failing.invariants.allHold, "\(failing.invariants.rows.filter { !$0.passed })")
        let windows = try #require(failing.recorder.descriptors.first { $0.name == "faults.active" && $0.labels == "kind=server-errors" })
        let active = failing.recorder.gaugeSeries[windows.id]
        #expect(active.prefix(before).allSatisfy { $0 == 0 } && active[before] == 1 && active.last == 0, "the window is recorded under its kind")
    }

    @Test("a link-slowdown stretches every stack's trips over the links it names: syncs and chat requests slow while it lasts, nothing before it changes")
    func congestedNetwork() async throws {
        let calm = await WorkflowSimulationTests.run(try Self.fullStack())
        let slow = await WorkflowSimulationTests.run(try Self.fullStack(kill: """
              - {kind: link-slowdown, link: wifi, at: 30m, duration: 30m, factor: 20}
              - {kind: link-slowdown, link: cellular, at: 30m, duration: 30m, factor: 20}
            """))
        // A 12-45 ms hop each way takes 20 times as long: a quarter of the run's requests
        // cross them, so each stack's p99 is one of them.
        for stack in ["sync", "chat"] {
            let (calmP99, slowP99) = (Self.slowestP99(calm, stack: stack), Self.slowestP99(slow, stack: stack))
            #expect(slowP99 > calmP99 + 300_000_000, "\(stack): p99 \(calmP99) ns calm, \(slowP99) ns slowed")
        }
        let bucket = try Self.fullStack().bucket
        let before = Int(TimeSpan.minutes(30).nanoseconds / bucket.nanoseconds)
        for name in ["sync.outbox_depth", "chat.server_utilisation"] {
            #expect(Array(try WorkflowSimulationTests.gauge(calm, name).prefix(before)) == Array(try WorkflowSimulationTests.gauge(slow, name).prefix(before)), "\(name)")
        }
        #expect(slow.invariants.allHold, "\(slow.invariants.rows.filter { !$0.passed })")
    }

    @Test("syncing more often costs more battery: same seed, the server asks for a sync every 10 s or every 2 min")
    func batteryFollowsSyncCadence() async throws {
        let often = await WorkflowSimulationTests.run(try Self.syncing(every: "10s"))
        let seldom = await WorkflowSimulationTests.run(try Self.syncing(every: "2m"))
        let syncs = (WorkflowSimulationTests.total(often, "sync.requests"), WorkflowSimulationTests.total(seldom, "sync.requests"))
        #expect(syncs.0 > syncs.1 * 5, "\(syncs)")
        let energy = (WorkflowSimulationTests.total(often, "energy.joules", "part=radio,stack=sync"),
                      WorkflowSimulationTests.total(seldom, "energy.joules", "part=radio,stack=sync"))
        #expect(energy.0 > energy.1 * 3, "sync radio energy \(energy)")
        let end = Instant.zero + .hours(3)
        let level = { (world: FleetWorld) in world.fleet.devices.reduce(0.0) { $0 + Double($1.batteryLevel(at: end)) } / 30 / 1_000_000 }
        #expect(level(often) < level(seldom) - 1, "mean battery at the end: \(level(often))% against \(level(seldom))%")
        #expect(often.invariants.rows.allSatisfy { $0.violations == 0 } && seldom.invariants.rows.allSatisfy { $0.violations == 0 })
    }

    @Test("each phone's battery cost is recorded: the phones' costs add up to the fleet's, and syncing more often costs the typical phone more than the seldom-syncing fleet's 90th percentile")
    func batteryCostPerPhone() async throws {
        let often = await WorkflowSimulationTests.run(try Self.syncing(every: "10s"))
        let seldom = await WorkflowSimulationTests.run(try Self.syncing(every: "2m"))
        func spread(_ world: FleetWorld, _ stack: String) throws -> LogLinearHistogram {
            let metric = try #require(world.recorder.descriptors.first { $0.name == "energy.device_day" && $0.labels == "population=kiosks,stack=\(stack)" })
            return try #require(world.recorder.runHistograms[metric.id])
        }
        for world in [often, seldom] {
            let all = try spread(world, "all")
            #expect(all.totalCount == 30, "one figure per kiosk")
            // The fleet's energy (the engine's ticks included) in hundredths of a percent of a
            // battery a day; each kiosk's figure is rounded to a whole hundredth.
            let joules = WorkflowSimulationTests.total(world, "energy.joules")
            let fleet = joules * world.fleet.classes[0].microPercentPerJoule / 10_000 / (3.0 / 24)
            #expect(abs(all.sum - fleet) <= 15, "the kiosks' figures add up to \(all.sum), the fleet's energy to \(fleet)")
            let stacks = try spread(world, "sync").sum + spread(world, "workflows").sum
            #expect(abs(stacks - all.sum) <= 30, "each stack's share adds up to every stack's")
        }
        let (oftenSync, seldomSync) = (try spread(often, "sync"), try spread(seldom, "sync"))
        #expect(oftenSync.value(atPercentile: 50) > seldomSync.value(atPercentile: 90),
                "sync a day, p50 of the 10 s fleet \(oftenSync.value(atPercentile: 50)) against p90 of the 2 min fleet \(seldomSync.value(atPercentile: 90)) (0.01 %)")
    }

    @Test("what an app stored must come back at its relaunch, unless the chat client signed in anew while the app was dead (the logout took its store)")
    func relaunchKeepsWhatWasStored() {
        let killed = StoredFacts(instances: 2, messages: 3, pending: 0, chatMessages: 6, chatPending: 1, chatSignIn: 1)
        var restored = killed
        restored.chatMessages = 0
        restored.chatPending = 0
        #expect(!restored.covers(killed), "the same sign-in lost six messages and a send")
        restored.chatSignIn = 2
        #expect(restored.covers(killed), "a new sign-in starts from an empty store")
        restored.instances = 1
        #expect(!restored.covers(killed), "a new chat sign-in does not excuse a lost workflow instance")
        var more = killed
        more.chatMessages += 4
        more.pending += 1
        #expect(more.covers(killed), "a relaunch may add")
    }
}
