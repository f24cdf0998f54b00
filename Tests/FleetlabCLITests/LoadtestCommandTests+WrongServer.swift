import Foundation
import Testing
import LabStore
import LabTestSupport

/// A load test pointed at a server that is not the stack's (a wrong port, a wrong path
/// prefix) says so at once: the refusals are failures with their status, and a phone that
/// cannot start does not wait out its deadline. (Part of the serialized loadtest suite: its
/// runs are not slowed by the others'.)
extension LoadtestCommandTests {
    @Test("pointed at the wrong server, agent and chat phones fail at once with why: the agent's workflow listing and the chat sign-up answered 404 are failures")
    func wrongServer() async throws {
        let served = try await ServedFleetlab.start(data: TestPaths.scratchDirectory("load-agent-refused-serve").path)
        defer { served.stop() }
        let dir = TestPaths.scratchDirectory("loadtest-agent-refused")
        let scenario = try agentScenario(in: dir, phones: 2, agent: "{workflows: {support-triage: 100%}}")
        // The chat server answers the runtime's workflow listing 404. Each chat used to wait
        // out its deadline (six request timeouts: 60 s), the run with it, its 404 counted
        // as a success; a 2 s run now ends in about 2 s (its own wall time: the process's
        // start and exit can take long beside the rest of the suite).
        let run = try await CommandRunner.fleetlabAsync(["loadtest", scenario, "--target", "agent=\(served.chatURL)", "--duration", "2s", "--devices", "2",
                                                         "--think", "200ms", "--out", "out", "--quiet"], in: dir)
        let results = try ResultsDatabase.open(at: dir.appendingPathComponent("out/results.sqlite").path).load()
        #expect(try #require(Double(results.runMetadata["wall_seconds"] ?? "")) < 30, "\(run.stdout)")
        #expect((results.total("loadtest.iterations", labels: "outcome=failed") ?? 0) >= 4, "\(run.stdout)")
        #expect((results.total("loadtest.iterations", labels: "outcome=ok") ?? 0) == 0, "\(run.stdout)")
        let failed = results.total("http.failures", labels: "endpoint=GET /api/workflows,stack=agent") ?? 0
        #expect(failed >= 4 && results.total("http.errors", labels: "endpoint=GET /api/workflows,reason=HTTP 404,stack=agent") == failed)
        #expect(run.stdout.contains("failures    agent GET /api/workflows HTTP 404 ×"), "\(run.stdout)")
        #expect(run.stdout.contains("failed (100.00%)"), "the requests line gives the failures' share: \(run.stdout)")
        // Not one iteration succeeded: FAILED, though the scenario sets no threshold.
        #expect(run.status == 3 && run.stdout.contains("— FAILED") && run.stdout.contains("✗ no iteration succeeded"), "\(run.stdout)")
        let page = try String(contentsOf: dir.appendingPathComponent("out/dashboard.html"), encoding: .utf8)
        #expect(page.contains("none succeeded: the targets refused every one"), "the dashboard says so too")

        // A chat phone's sign-up answered 404 (here by the agent runtime) was not a failure:
        // the iterations failed without a reason anywhere.
        let chat = try writeScenario(Self.talk(phones: 2), in: dir, name: "talk.yaml")
        let signUp = try await CommandRunner.fleetlabAsync(["loadtest", chat, "--target", "chat=\(served.agentURL)", "--duration", "2s", "--devices", "2",
                                                            "--think", "200ms", "--out", "chat", "--quiet", "--junit", "chat.xml"], in: dir)
        let chatResults = try ResultsDatabase.open(at: dir.appendingPathComponent("chat/results.sqlite").path).load()
        #expect((chatResults.total("loadtest.iterations", labels: "outcome=ok") ?? 0) == 0, "\(signUp.stdout)")
        #expect(chatResults.total("http.errors", labels: "endpoint=POST /api/v1/auth/register,reason=HTTP 404,stack=chat") == 2, "\(signUp.stdout)")
        #expect(signUp.status == 3)
        let junit = try String(contentsOf: dir.appendingPathComponent("chat.xml"), encoding: .utf8)
        #expect(junit.contains("<testcase name=\"some iteration succeeded\" classname=\"fleetlab.loadtest\"") && junit.contains("failures=\"1\""), "\(junit)")
    }

    @Test("shards whose every iteration the target refused (a wrong key) each fail, and so does their merge, though every threshold holds")
    func refusedShards() async throws {
        let (served, dir, scenario) = try await servedLoad("load-refused-shards-serve", "loadtest-refused-shards")
        defer { served.stop() }
        for shard in ["0/2", "1/2"] {
            let run = try await CommandRunner.fleetlabAsync(["loadtest", scenario, "--target", "sync=\(served.syncURL)", "--duration", "1s", "--devices", "4",
                                                             "--think", "200ms", "--shard", shard, "--out", "shard-\(shard.prefix(1))", "--quiet"], in: dir,
                                                            environment: ["FLEETLAB_KEY_SYNC": "fl_root_not-this-servers-key"])
            #expect(run.status == 3 && run.stdout.contains("✓ p99(http.latency{stack=sync})"), "the refusals are quick: \(run.stdout)\(run.stderr)")
        }
        let merge = try await CommandRunner.fleetlabAsync(["merge", "merged/results.sqlite", "shard-0/results.sqlite", "shard-1/results.sqlite",
                                                           "--junit", "merged.xml"], in: dir)
        #expect(merge.status == 3 && merge.stdout.contains("— FAILED") && merge.stdout.contains("✗ no iteration succeeded"), "\(merge.stdout)\(merge.stderr)")
        let junit = try String(contentsOf: dir.appendingPathComponent("merged.xml"), encoding: .utf8)
        #expect(junit.contains("<testcase name=\"some iteration succeeded\" classname=\"fleetlab.loadtest\""), "\(junit)")
    }

    @Test("a runtime that does not list a workflow of the scenario's mix is exit 2 before the clock starts, naming it and what the runtime lists")
    func unlistedWorkflow() async throws {
        let served = try await ServedFleetlab.start(data: TestPaths.scratchDirectory("load-agent-unlisted-serve").path)
        defer { served.stop() }
        let dir = TestPaths.scratchDirectory("loadtest-agent-unlisted")
        // A workflow of the scenario's own folder that serve's runtime (its defaults) lacks.
        let folder = dir.appendingPathComponent("agent-workflows")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let triage = try String(contentsOf: TestPaths.packageRoot.appendingPathComponent("simulations/agent-workflows/support-triage.yaml"), encoding: .utf8)
        try triage.replacingOccurrences(of: "name: support-triage", with: "name: unlisted-triage")
            .write(to: folder.appendingPathComponent("unlisted-triage.yaml"), atomically: true, encoding: .utf8)
        let scenario = try writeScenario("""
            name: unlisted
            seed: 6
            duration: 1h
            devices:
              - {name: phones, count: 2, stacks: [agent]}
            agent: {workflows: {unlisted-triage: 100%}}
            """, in: dir, name: "unlisted.yaml")
        // The client would fall back to the runtime's entry point, and the load test
        // measure another workflow than the scenario's without a word.
        // A generous deadline for the listing: a runtime that does not answer in time is
        // left to the phones, and a debug build beside the rest of the suite can be slow.
        let run = try await CommandRunner.fleetlabAsync(["loadtest", scenario, "--target", "agent=\(served.agentURL)", "--duration", "2s", "--devices", "2",
                                                         "--request-timeout", "60s", "--out", "out", "--quiet"], in: dir,
                                                        environment: ["FLEETLAB_KEY_AGENT": served.agentToken])
        #expect(run.status == 2, "\(run.stdout)\(run.stderr)")
        #expect(run.stderr.contains("does not list unlisted-triage") && run.stderr.contains("support-triage"), "\(run.stderr)")
        #expect(!FileManager.default.fileExists(atPath: dir.appendingPathComponent("out").path), "nothing is written")
    }
}
