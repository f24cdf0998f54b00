import Foundation
import Testing
import LabKernel
import LabStore
import LabTestSupport

/// A scenario for load tests: payment-verification started once on each phone, a sync p99 bound.
func loadScenario(p99: String = "2s", extra: String = "") -> String {
    let workflows = TestPaths.packageRoot.appendingPathComponent("simulations/workflows").path
    return """
    name: load
    seed: 4
    duration: 1h
    devices:
      - {name: phones, count: 10, stacks: [workflows, sync]}
    sync: {}
    workflows:
      run:
        - {sequence: \(workflows)/payment-verification.json, start: {poisson: 1h}}
    thresholds:
      - {metric: http.latency, labels: {stack: sync}, percentile: 99, max: \(p99)}
      - {metric: battery.mean, stat: min, min: 20}
    \(extra)
    """
}

/// A scenario of `phones` agent phones written in `dir` (`chats.yaml`), its `agent:` section
/// `agent`; the repository's agent workflows are linked beside it, as the section's names
/// are looked up in the folder beside the scenario.
func agentScenario(in dir: URL, phones: Int, agent: String, thresholds: String = "") throws -> String {
    try FileManager.default.createSymbolicLink(atPath: dir.appendingPathComponent("agent-workflows").path,
                                               withDestinationPath: TestPaths.packageRoot.appendingPathComponent("simulations/agent-workflows").path)
    return try writeScenario("""
        name: chats
        seed: 6
        duration: 1h
        devices:
          - {name: phones, count: \(phones), stacks: [agent]}
        agent: \(agent)
        \(thresholds.isEmpty ? "" : "thresholds:\n" + thresholds)
        """, in: dir, name: "chats.yaml")
}

/// `fleetlab serve` for a test (its data in scratch directory `serve`), and scratch
/// directory `run` holding `scenario` (the load scenario unless given) as `load.yaml`.
func servedLoad(_ serve: String, _ run: String, extra: [String] = [], scenario: String = loadScenario()) async throws
    -> (served: ServedFleetlab, dir: URL, scenario: String) {
    let served = try await ServedFleetlab.start(data: TestPaths.scratchDirectory(serve).path, extra: extra)
    let dir = TestPaths.scratchDirectory(run)
    do { return (served, dir, try writeScenario(scenario, in: dir, name: "load.yaml")) } catch {
        served.stop()
        throw error
    }
}

@Suite("fleetlab loadtest", .serialized)
struct LoadtestCommandTests {
    @Test("closed and open models drive fleetlab serve over real sockets; results, dashboard and thresholds as a simulation's; the key stays out of the results")
    func againstServe() async throws {
        let (served, dir, scenario) = try await servedLoad("load-serve", "loadtest", scenario: loadScenario(
            extra: "  - {metric: http.failures, labels: {stack: sync}, per: http.requests, max: 1%}"))
        defer { served.stop() }
        let closed = try await CommandRunner.fleetlabAsync(["loadtest", scenario, "--target", "sync=\(served.syncURL)", "--key", "sync=\(served.rootKey)",
                                                            "--duration", "3s", "--devices", "8", "--think", "100ms", "--out", "closed"], in: dir)
        #expect(closed.status == 0, "\(closed.stdout)\(closed.stderr)")
        #expect(closed.stdout.contains("fleetlab loadtest load — PASSED"))
        #expect(closed.stdout.contains("model       closed: 8 phones, think 100ms"))
        #expect(closed.stdout.contains("(tenant fleet, created for this run)"), "the scenario's sync tenant, made with the root key")
        #expect(closed.stdout.contains("skipped     1 threshold on what a load test does not measure: min(battery.mean)"))
        let results = try ResultsDatabase.open(at: dir.appendingPathComponent("closed/results.sqlite").path).load()
        let sync = try #require(results.metric(named: "http.latency", labels: "endpoint=POST /api/v1/mobile/sync,stack=sync"))
        #expect(results.histogram(sync).totalCount > 40, "8 phones for 3 s at about 10 iterations a second each")
        #expect(results.total("loadtest.iterations", labels: "outcome=ok") ?? 0 > 40)
        #expect(results.total("http.failures", labels: "endpoint=POST /api/v1/mobile/sync,stack=sync") == 0)
        #expect(results.runMetadata["mode"] == "loadtest" && results.runMetadata["targets"] == "sync=\(served.syncURL)")
        #expect(results.thresholds.count == 2 && results.thresholdsPassed)
        let requests = try #require(results.total("http.requests", labels: "endpoint=POST /api/v1/mobile/sync,stack=sync"))
        #expect(requests == Double(results.histogram(sync).totalCount), "every request is counted, and timed")
        #expect(closed.stdout.contains("✓ http.failures{stack=sync} per http.requests{stack=sync} = 0.000% (0 of "), "\(closed.stdout)")
        let file = try Data(contentsOf: dir.appendingPathComponent("closed/results.sqlite"))
        #expect(file.range(of: Data(served.rootKey.utf8)) == nil, "the API key is not in the results")
        let page = try String(contentsOf: dir.appendingPathComponent("closed/dashboard.html"), encoding: .utf8)
        #expect(page.contains("<title>Load test: load</title>") && page.contains("live against sync="))

        // Open model: 400 arrivals a second for a pool of 2 phones, each arrival run or counted once.
        let open = try await CommandRunner.fleetlabAsync(["loadtest", scenario, "--target", "sync=\(served.syncURL)", "--duration", "2s", "--rate", "400/s",
                                                          "--devices", "2", "--out", "open", "--quiet"], in: dir,
                                                         environment: ["FLEETLAB_KEY_SYNC": served.rootKey])
        #expect(open.status == 0, "\(open.stdout)\(open.stderr)")
        #expect(open.stdout.contains("(tenant fleet-"), "the tenant exists: the run gets one of its own")
        let openResults = try ResultsDatabase.open(at: dir.appendingPathComponent("open/results.sqlite").path).load()
        let ok = openResults.total("loadtest.iterations", labels: "outcome=ok") ?? 0
        let dropped = openResults.total("loadtest.iterations", labels: "outcome=dropped") ?? 0
        #expect(ok > 10, "ok \(ok), dropped \(dropped)")
        #expect(abs(ok + dropped + (openResults.total("loadtest.iterations", labels: "outcome=failed") ?? 0) - 800) <= 2, "every arrival is counted once")

        // A tenant's key is used as it is.
        let tenant = try await HTTPProbe.request("POST", served.syncURL + "/api/v1/mobile/tenants", body: Data(#"{"tenant_id":"ops"}"#.utf8),
                                                 headers: ["x-api-key": served.rootKey, "content-type": "application/json"])
        let tenantKey = try #require(try JSONValue.parse(String(decoding: tenant.body, as: UTF8.self))["api_key"]?.stringValue)
        let asTenant = try await CommandRunner.fleetlabAsync(["loadtest", scenario, "--target", "sync=\(served.syncURL)", "--key", "sync=\(tenantKey)",
                                                              "--duration", "1s", "--devices", "2", "--out", "tenant", "--quiet"], in: dir)
        #expect(asTenant.status == 0 && !asTenant.stdout.contains("created for this run"), "\(asTenant.stdout)\(asTenant.stderr)")
        #expect(asTenant.stdout.contains("0 failed"))

        // A bound the server cannot meet fails the run with exit status 3.
        let strict = try writeScenario(loadScenario(p99: "1us"), in: dir, name: "strict.yaml")
        let failed = try await CommandRunner.fleetlabAsync(["loadtest", strict, "--target", "sync=\(served.syncURL)", "--key", "sync=\(served.rootKey)",
                                                            "--duration", "1s", "--devices", "2", "--out", "strict", "--quiet"], in: dir)
        #expect(failed.status == 3)
        #expect(failed.stdout.contains("✗ p99(http.latency{stack=sync})"))
    }

    @Test("app-paced phones tick their engines and sync when their client says so: one registration and one first sync each in a few seconds")
    func appPaced() async throws {
        let (served, dir, scenario) = try await servedLoad(
            "load-serve", "loadtest", scenario: loadScenario(extra: "  - {metric: sync.interval, labels: {power_state: LowBattery}, percentile: 50, max: 2m}"))
        defer { served.stop() }
        let run = try await CommandRunner.fleetlabAsync(["loadtest", scenario, "--target", "sync=\(served.syncURL)", "--key", "sync=\(served.rootKey)",
                                                         "--duration", "4s", "--devices", "6", "--app-paced", "--out", "app", "--quiet"], in: dir)
        #expect(run.status == 0, "\(run.stdout)\(run.stderr)")
        #expect(run.stdout.contains("paced as the app"))
        #expect(run.stdout.contains("p50(sync.interval{power_state=LowBattery})"), "a power state live phones never run in is skipped: \(run.stdout)")
        let results = try ResultsDatabase.open(at: dir.appendingPathComponent("app/results.sqlite").path).load()
        // The server asks idle phones to sync every 30 s: in 4 s, each phone's first sync only.
        let sync = try #require(results.metric(named: "http.latency", labels: "endpoint=POST /api/v1/mobile/sync,stack=sync"))
        #expect(results.histogram(sync).totalCount == 6)
        #expect(results.total("loadtest.iterations", labels: "outcome=ok") == 6)
        #expect(results.total("http.failures", labels: "endpoint=POST /api/v1/mobile/sync,stack=sync") == 0)
    }

    @Test("a wrong key and a closed port are failures counted per endpoint, each request within its deadline")
    func failures() async throws {
        let (served, dir, scenario) = try await servedLoad("load-serve", "loadtest")
        defer { served.stop() }
        let wrongKey = try await CommandRunner.fleetlabAsync(["loadtest", scenario, "--target", "sync=\(served.syncURL)", "--key", "sync=fl_root_wrong",
                                                              "--duration", "1s", "--devices", "2", "--think", "100ms", "--out", "wrong", "--quiet"], in: dir)
        let results = try ResultsDatabase.open(at: dir.appendingPathComponent("wrong/results.sqlite").path).load()
        #expect(results.total("http.failures", labels: "endpoint=POST /api/v1/mobile/devices/register,stack=sync") ?? 0 > 2, "\(wrongKey.stdout)")
        #expect(results.total("loadtest.iterations", labels: "outcome=ok") ?? 0 == 0)
        let port = try ServedFleetlab.freePort()
        let started = Date()
        let closed = try await CommandRunner.fleetlabAsync(["loadtest", scenario, "--target", "sync=http://127.0.0.1:\(port)", "--duration", "1s",
                                                            "--devices", "2", "--think", "100ms", "--out", "closed", "--quiet"], in: dir)
        #expect(Date().timeIntervalSince(started) < 20)
        #expect(closed.stdout.contains("0 ok"), "\(closed.stdout)")
    }

    @Test("the agent runtime as a target: each iteration is a chat with the printed token's user, recorded by route and first chunk; the token stays out of the results")
    func agentChats() async throws {
        let workflows = TestPaths.packageRoot.appendingPathComponent("simulations/agent-workflows").path
        let served = try await ServedFleetlab.start(data: TestPaths.scratchDirectory("load-agent-serve").path, extra: ["--agent-workflows", workflows])
        defer { served.stop() }
        let dir = TestPaths.scratchDirectory("loadtest-agent")
        let scenario = try agentScenario(in: dir, phones: 4, agent: "{workflows: {support-triage: 50%, trip-planner: 50%}, inputsPerChat: 2}", thresholds: """
              - {metric: agent.first_chunk, percentile: 90, max: 10s}
              - {metric: http.latency, labels: {stack: agent}, percentile: 99, max: 10s}
            """)
        let run = try await CommandRunner.fleetlabAsync(["loadtest", scenario, "--target", "agent=\(served.agentURL)", "--duration", "3s", "--devices", "4",
                                                         "--think", "200ms", "--out", "agent", "--quiet"], in: dir,
                                                        environment: ["FLEETLAB_KEY_AGENT": served.agentToken])
        #expect(run.status == 0, "\(run.stdout)\(run.stderr)")
        let results = try ResultsDatabase.open(at: dir.appendingPathComponent("agent/results.sqlite").path).load()
        let start = try #require(results.metric(named: "http.latency", labels: "endpoint=POST /api/chats/{app}/{workflow}/start,stack=agent"))
        #expect(results.histogram(start).totalCount >= 4, "every phone started at least one chat")
        let firstChunk = try #require(results.metric(named: "agent.first_chunk"))
        #expect(results.histogram(firstChunk).totalCount >= 4)
        #expect(results.total("loadtest.iterations", labels: "outcome=ok") ?? 0 >= 4)
        #expect((results.total("loadtest.iterations", labels: "outcome=failed") ?? 0) == 0)
        #expect(results.thresholds.count == 2 && results.thresholdsPassed, "both thresholds are measured, none skipped")
        #expect(results.runMetadata["targets"] == "agent=\(served.agentURL)")
        let file = try Data(contentsOf: dir.appendingPathComponent("agent/results.sqlite"))
        #expect(file.range(of: Data(served.agentToken.utf8)) == nil, "the token is not in the results")

        // The open model's pool is the phones of the targeted stack, agent alone included.
        let open = try await CommandRunner.fleetlabAsync(["loadtest", scenario, "--target", "agent=\(served.agentURL)", "--duration", "2s", "--rate", "4/s",
                                                          "--devices", "4", "--out", "agent-open", "--quiet"], in: dir,
                                                         environment: ["FLEETLAB_KEY_AGENT": served.agentToken])
        #expect(open.status == 0, "\(open.stdout)\(open.stderr)")
        let openResults = try ResultsDatabase.open(at: dir.appendingPathComponent("agent-open/results.sqlite").path).load()
        #expect(openResults.total("loadtest.iterations", labels: "outcome=ok") ?? 0 >= 4, "chats ran: \(open.stdout)")
        #expect((openResults.total("loadtest.iterations", labels: "outcome=failed") ?? 0) == 0,
                "a second run against the same runtime starts chats of its own, not the first run's: \(open.stdout)")
    }

    /// A scenario of `phones` chat-only phones (thresholds may follow).
    /// Phones that only chat; with the default `chat:` section they send DMs only.
    static func talk(phones: Int, chat: String = "{groups: 0}") -> String {
        """
        name: talk
        seed: 8
        duration: 1h
        devices:
          - {name: phones, count: \(phones), stacks: [chat]}
        chat: \(chat)

        """
    }

    /// A 3-second chat load test of `phones` phones against a fresh `fleetlab serve`: its
    /// output, its results, and the chat server's database file once the server stopped.
    func chatLoadTest(_ name: String, phones: Int, chat: String, thresholds: String, extra: [String] = []) async throws -> (CommandRunner.Result, RunResults, Data) {
        let data = TestPaths.scratchDirectory("load-\(name)-serve")
        let served = try await ServedFleetlab.start(data: data.path)
        defer { served.stop() }
        let dir = TestPaths.scratchDirectory("loadtest-\(name)")
        let scenario = try writeScenario(Self.talk(phones: phones, chat: chat) + "thresholds:\n" + thresholds, in: dir, name: "\(name).yaml")
        let run = try await CommandRunner.fleetlabAsync(["loadtest", scenario, "--target", "chat=\(served.chatURL)", "--duration", "3s",
                                                         "--devices", String(phones), "--think", "200ms", "--out", "out"] + extra, in: dir)
        let results = try ResultsDatabase.open(at: dir.appendingPathComponent("out/results.sqlite").path).load()
        served.stop()
        return (run, results, try Data(contentsOf: data.appendingPathComponent("chat.sqlite")))
    }

    @Test("the chat server as a target: phones in pairs register, open a DM and each message is decrypted on the partner's phone; the server keeps no plaintext")
    func chatMessages() async throws {
        let (run, results, stored) = try await chatLoadTest("chat", phones: 5, chat: "{groups: 0}", thresholds: """
              - {metric: chat.delivery_latency, percentile: 90, max: 10s}
              - {metric: http.latency, labels: {stack: chat}, percentile: 99, max: 10s}
            """)
        #expect(run.status == 0, "\(run.stdout)\(run.stderr)")
        #expect(run.stdout.contains("decrypted on the partner's phone"))
        let register = try #require(results.metric(named: "http.latency", labels: "endpoint=POST /api/v1/auth/register,stack=chat"))
        #expect(results.histogram(register).totalCount == 5, "each phone registered its own user once")
        let delivered = try #require(results.metric(named: "chat.delivery_latency", labels: "kind=dm"))
        let ok = results.total("loadtest.iterations", labels: "outcome=ok") ?? 0
        #expect(ok >= 10 && Double(results.histogram(delivered).totalCount) == ok, "every ok iteration is one message decrypted by the partner")
        #expect((results.total("loadtest.iterations", labels: "outcome=failed") ?? 0) == 0)
        #expect(results.thresholds.count == 2 && results.thresholdsPassed, "both thresholds are measured, none skipped")
        #expect(stored.range(of: Data(" message 1".utf8)) == nil, "the server stored ciphertext only")
    }

    @Test("chat groups: the scenario's groups are formed among the phones before the clock starts, and each group message is decrypted on every member's phone")
    func chatGroups() async throws {
        // Two groups of 3 or 4 among 6 phones, and every member's messages go to a group.
        let (run, results, stored) = try await chatLoadTest("chat-groups", phones: 6, chat: "{groups: 2, groupSize: [3, 4], groupShare: 100%}", thresholds: """
              - {metric: chat.delivery_latency, labels: {kind: group}, percentile: 90, max: 10s}
            """)
        #expect(run.status == 0, "\(run.stdout)\(run.stderr)")
        #expect(run.stdout.contains("decrypted on each member's phone"))
        let created = try #require(results.metric(named: "http.latency", labels: "endpoint=POST /api/v1/channels,stack=chat"))
        #expect(results.histogram(created).totalCount == 2, "each group created once, by its first member")
        let group = try #require(results.metric(named: "chat.delivery_latency", labels: "kind=group"))
        // A message to a group of three or four reaches two or three other phones.
        #expect(results.histogram(group).totalCount >= 20)
        #expect((results.total("loadtest.iterations", labels: "outcome=failed") ?? 0) == 0, "every member got every group message in time")
        #expect(results.thresholds.count == 1 && results.thresholdsPassed)
        #expect(results.total("chat.typing") ?? 0 > 0, "half the messages are announced by typing.start, and the other members hear it")
        #expect(stored.range(of: Data(" message 1".utf8)) == nil, "the server stored ciphertext only")
    }

    @Test("--relaunch 100%: every app is killed after its iteration and the next launches it from what it stored; messages sent meanwhile are decrypted after the relaunch and recorded from their send")
    func chatRelaunch() async throws {
        let (run, results, _) = try await chatLoadTest("chat-relaunch", phones: 4, chat: "{groups: 0}", thresholds: """
              - {metric: chat.delivery_latency, percentile: 50, max: 10s}
            """, extra: ["--relaunch", "100%"])
        #expect(run.status == 0, "\(run.stdout)\(run.stderr)")
        #expect(run.stdout.contains("killed apps launched again, open and caught up after"))
        let ok = results.total("loadtest.iterations", labels: "outcome=ok") ?? 0
        #expect(ok >= 12 && (results.total("loadtest.iterations", labels: "outcome=failed") ?? 0) == 0)
        // Each phone's iterations after its first begin with a relaunch.
        let relaunch = try #require(results.metric(named: "loadtest.chat_relaunch"))
        #expect(Double(results.histogram(relaunch).totalCount) == ok - 4)
        let register = try #require(results.metric(named: "http.latency", labels: "endpoint=POST /api/v1/auth/register,stack=chat"))
        let me = try #require(results.metric(named: "http.latency", labels: "endpoint=GET /api/v1/users/me,stack=chat"))
        #expect(results.histogram(register).totalCount == 4, "a relaunch restores the session; nobody signs up again")
        #expect(Double(results.histogram(me).totalCount) == ok, "one `me` at sign-up and one for each relaunch")
        // A partner is away (killed, thinking) for most of each message's life; its copy is
        // decrypted from the catch-up after its relaunch. Only what was sent after a phone's
        // last kill (at most a few at the end) goes unread.
        let delivered = try #require(results.metric(named: "chat.delivery_latency", labels: "kind=dm"))
        #expect(Double(results.histogram(delivered).totalCount) >= ok - 12, "\(results.histogram(delivered).totalCount) of \(ok)")
        let pages = try #require(results.metric(named: "http.latency", labels: "endpoint=GET /api/v1/channels/{id}/messages,stack=chat"))
        #expect(Double(results.histogram(pages).totalCount) >= ok - 4, "each relaunch catches its DM up")
    }

    @Test("--relaunch 100% on sync: every app is killed after its iteration and the next launches it from its store (no second registration) and syncs; every sync is accepted")
    func syncRelaunch() async throws {
        let (served, dir, scenario) = try await servedLoad("load-sync-relaunch", "loadtest-sync-relaunch")
        defer { served.stop() }
        let run = try await CommandRunner.fleetlabAsync(["loadtest", scenario, "--target", "sync=\(served.syncURL)", "--duration", "2s", "--devices", "4",
                                                         "--think", "100ms", "--relaunch", "100%", "--out", "r", "--quiet"], in: dir,
                                                        environment: ["FLEETLAB_KEY_SYNC": served.rootKey])
        #expect(run.status == 0, "\(run.stdout)\(run.stderr)")
        let results = try ResultsDatabase.open(at: dir.appendingPathComponent("r/results.sqlite").path).load()
        let ok = results.total("loadtest.iterations", labels: "outcome=ok") ?? 0
        #expect(ok > 8 && (results.total("loadtest.iterations", labels: "outcome=failed") ?? 0) == 0)
        let relaunches = results.histogram(try #require(results.metric(named: "loadtest.sync_relaunch")))
        #expect(Double(relaunches.totalCount) == ok - 4, "every iteration after a phone's first launches it again")
        let register = try #require(results.metric(named: "http.latency", labels: "endpoint=POST /api/v1/mobile/devices/register,stack=sync"))
        #expect(results.histogram(register).totalCount == 4, "a relaunched app does not register again")
        #expect(results.total("http.failures", labels: "endpoint=POST /api/v1/mobile/sync,stack=sync") == 0)
        #expect(run.stdout.contains("sync: killed apps launched again, their engines restored and synced after"), "\(run.stdout)")
    }

    @Test("a chat server that throttles sign-ups (serve --chat-auth-per-minute 3): the refused registrations are failures, and so is every message of an unregistered pair; a bound on failures per request fails the run")
    func chatThrottled() async throws {
        let served = try await ServedFleetlab.start(data: TestPaths.scratchDirectory("load-chat-throttled").path, extra: ["--chat-auth-per-minute", "3"])
        defer { served.stop() }
        let dir = TestPaths.scratchDirectory("loadtest-chat-throttled")
        // The error rate k6 users bound first (`http_req_failed: rate<0.01`), here on the share of
        // chat requests that failed.
        let scenario = try writeScenario(Self.talk(phones: 4) + "thresholds:\n  - {metric: http.failures, labels: {stack: chat}, per: http.requests, max: 0.1%}\n",
                                         in: dir, name: "talk.yaml")
        let run = try await CommandRunner.fleetlabAsync(["loadtest", scenario, "--target", "chat=\(served.chatURL)", "--duration", "2s", "--devices", "4",
                                                         "--think", "200ms", "--request-timeout", "1s", "--out", "chat", "--quiet",
                                                         "--junit", "chat.xml"], in: dir)
        let results = try ResultsDatabase.open(at: dir.appendingPathComponent("chat/results.sqlite").path).load()
        #expect(run.status == 3, "\(run.stdout)\(run.stderr)")
        let junit = try String(contentsOf: dir.appendingPathComponent("chat.xml"), encoding: .utf8)
        #expect(junit.contains("<testcase name=\"http.failures{stack=chat} per http.requests{stack=chat} &lt;= 0.10%\""), "\(junit)")
        let failures = results.total(allLabelsOf: "http.failures"), requests = results.total(allLabelsOf: "http.requests")
        #expect(run.stdout.contains("✗ http.failures{stack=chat} per http.requests{stack=chat} = "), "\(run.stdout)")
        #expect(run.stdout.contains("(\(MetricUnit.count.format(failures)) of \(MetricUnit.count.format(requests))) breaks <= 0.10%"), "\(run.stdout)")
        // Three sign-ups a minute: two phones register, a third's ticket or registration is refused.
        #expect(results.total("http.failures", labels: "endpoint=POST /api/v1/auth/register,stack=chat") ?? 0 >= 1, "a refused sign-up is a failure")
        #expect(results.total("loadtest.iterations", labels: "outcome=failed") ?? 0 >= 1)
        #expect(results.total("http.errors", labels: "endpoint=POST /api/v1/auth/register,reason=HTTP 429,stack=chat") ?? 0 >= 1, "each failure is counted by why")
    }

    @Test("a threshold with abortOnFail stops the run once the data so far passes it (after its delayAbortEval), exit 3; a min cannot abort")
    func abortOnFail() async throws {
        let (served, dir, scenario) = try await servedLoad("load-abort-serve", "loadtest-abort", scenario: loadScenario(p99: "1us", extra: """
              - {metric: http.latency, labels: {stack: sync}, percentile: 50, max: 1us, abortOnFail: true, delayAbortEval: 2s}
            """))
        defer { served.stop() }
        let started = Date()
        let run = try await CommandRunner.fleetlabAsync(["loadtest", scenario, "--target", "sync=\(served.syncURL)", "--key", "sync=\(served.rootKey)",
                                                         "--duration", "60s", "--devices", "4", "--think", "100ms", "--out", "abort", "--quiet"], in: dir)
        let took = Date().timeIntervalSince(started)
        #expect(run.status == 3, "\(run.stdout)\(run.stderr)")
        #expect(run.stdout.contains("fleetlab loadtest load — FAILED"))
        #expect(run.stdout.contains("aborted     at 2") && run.stdout.contains("p50(http.latency{stack=sync})"), "\(run.stdout)")
        #expect(took < 20, "stopped at about 2 s of a 60 s run, not at its end: \(took) s")
        let results = try ResultsDatabase.open(at: dir.appendingPathComponent("abort/results.sqlite").path).load()
        let wall = Double(results.runMetadata["wall_seconds"] ?? "") ?? 0
        #expect(wall >= 2 && wall < 4, "not before its delayAbortEval: \(wall) s")
        #expect(results.runMetadata["aborted"]?.contains("p50(http.latency{stack=sync})") == true)

        let minimum = try writeScenario(loadScenario(extra: """
              - {metric: loadtest.iterations, stat: total, min: 10, abortOnFail: true}
            """), in: dir, name: "min.yaml")
        let refused = try await CommandRunner.fleetlabAsync(["loadtest", minimum, "--target", "sync=http://127.0.0.1:9", "--duration", "1s"], in: dir)
        #expect(refused.status == 2 && refused.stderr.contains("abortOnFail stops a load test once a max is passed"), "\(refused.stderr)")
    }

    @Test("failures are counted by why: a server that is not there is `unreachable`, in the results, the summary and the dashboard")
    func failureReasons() async throws {
        let dir = TestPaths.scratchDirectory("loadtest-unreachable")
        let scenario = try writeScenario(loadScenario(), in: dir, name: "load.yaml")
        let port = try ServedFleetlab.freePort()
        let run = try await CommandRunner.fleetlabAsync(["loadtest", scenario, "--target", "sync=http://127.0.0.1:\(port)", "--key", "sync=fl_none",
                                                         "--duration", "1s", "--devices", "2", "--think", "100ms", "--request-timeout", "1s", "--out", "out"], in: dir)
        #expect(run.status == 0 || run.status == 3, "\(run.stdout)\(run.stderr)")
        let results = try ResultsDatabase.open(at: dir.appendingPathComponent("out/results.sqlite").path).load()
        let failed = results.total("http.failures", labels: "endpoint=POST /api/v1/mobile/devices/register,stack=sync") ?? 0
        #expect(failed >= 2)
        #expect(results.total("http.errors", labels: "endpoint=POST /api/v1/mobile/devices/register,reason=unreachable,stack=sync") == failed)
        #expect(run.stdout.contains("failures    sync POST /api/v1/mobile/devices/register unreachable ×"), "\(run.stdout)")
        let page = try String(contentsOf: dir.appendingPathComponent("out/dashboard.html"), encoding: .utf8)
        #expect(page.contains("Failures by why") && page.contains("<td>unreachable</td>"))
    }

    @Test("bad input is exit 2 before anything is contacted: no target, an unsupported stack, a model's option on the other model, no duration")
    func badInput() async throws {
        let dir = TestPaths.scratchDirectory("loadtest")
        let scenario = try writeScenario(loadScenario(), in: dir, name: "load.yaml")
        for (arguments, message) in [
            (["--duration", "1s"], "--target sync="),
            (["--duration", "1s", "--target", "desktop=http://127.0.0.1:9"], "the desktop bridge is a server on one person's desktop"),
            (["--duration", "1s", "--target", "ai-bridge=http://127.0.0.1"], "the relay's URL takes http://host:port"),
            (["--duration", "1s", "--target", "ai-bridge=http://127.0.0.1:9", "--key", "ai-bridge=k"], "the relay takes no key"),
            (["--duration", "1s", "--target", "chat=http://127.0.0.1:9", "--devices", "1"], "phones chat in pairs"),
            (["--duration", "1s", "--target", "chat=http://127.0.0.1"], "not an http://host:port or https:// URL"),
            (["--duration", "1s", "--target", "agent=http://127.0.0.1:9", "--key", "agent=not-a-jwt"], "expected the runtime's bearer token"),
            (["--duration", "1s", "--target", "agent=http://127.0.0.1:9", "--app-paced"], "--app-paced paces the sync stack"),
            (["--duration", "1s", "--target", "sync=ftp://x"], "expected NAME=http://host:port"),
            (["--duration", "1s", "--target", "sync=http://127.0.0.1:9", "--rate", "10", "--think", "1s"], "--think and --app-paced are for the closed model"),
            (["--duration", "1s", "--target", "sync=http://127.0.0.1:9", "--ramp", "1s"], "--ramp and --max-wait are for the open model"),
            (["--target", "sync=http://127.0.0.1:9"], "--duration"),
            (["--duration", "1s", "--target", "chat=http://127.0.0.1:9", "--relaunch", "120%"], "expected a chance"),
            (["--target", "sync=http://127.0.0.1:9", "--stages", "1s:10,1s"], "expected DURATION:TARGET stages"),
            (["--target", "sync=http://127.0.0.1:9", "--stages", "1s:10,1s:5/s"], "expected DURATION:TARGET stages"),
            (["--target", "sync=http://127.0.0.1:9", "--stages", "0s:10"], "lasting more than 0"),
            (["--target", "sync=http://127.0.0.1:9", "--stages", "1s:10", "--duration", "5s"], "leave out --duration"),
            (["--target", "sync=http://127.0.0.1:9", "--stages", "1s:10", "--devices", "5"], "leave out --devices"),
            (["--target", "sync=http://127.0.0.1:9", "--stages", "1s:10/s", "--rate", "5"], "--stages replaces --rate"),
            (["--target", "sync=http://127.0.0.1:9", "--stages", "1s:10/s", "--think", "1s"], "its pace is the stages"),
            (["--duration", "1s", "--target", "sync=http://127.0.0.1:9", "--shard", "2/2"], "expected I/N"),
            (["--duration", "1s", "--target", "sync=http://127.0.0.1:9", "--devices", "2", "--shard", "0/4"], "share of the phones is none"),
            (["--duration", "1s", "--target", "agent=http://127.0.0.1:9", "--relaunch", "10%"], "it needs --target chat=URL or --target sync=URL"),
            (["--duration", "1s", "--target", "sync=http://127.0.0.1:9", "--relaunch", "10%", "--app-paced"], "--app-paced phones run one app for the whole test"),
        ] {
            let result = try await CommandRunner.fleetlabAsync(["loadtest", scenario] + arguments, in: dir)
            #expect(result.status == 2, "\(arguments)")
            #expect(result.stderr.contains(message), "\(arguments): \(result.stderr)")
        }
    }

    @Test("--stages: the closed model's phones ramp up, hold and ramp down, each starting when its turn comes; rates in stages drive the open model")
    func stages() async throws {
        let (served, dir, scenario) = try await servedLoad("load-stages-serve", "loadtest-stages")
        defer { served.stop() }
        let run = try await CommandRunner.fleetlabAsync(["loadtest", scenario, "--target", "sync=\(served.syncURL)", "--stages", "1s:6,1s:6,1s:0",
                                                         "--think", "100ms", "--out", "closed", "--quiet"], in: dir,
                                                        environment: ["FLEETLAB_KEY_SYNC": served.rootKey])
        #expect(run.status == 0, "\(run.stdout)\(run.stderr)")
        #expect(run.stdout.contains("model       closed: up to 6 phones in stages 1s:6,1s:6,1s:0, think 100ms"))
        let results = try ResultsDatabase.open(at: dir.appendingPathComponent("closed/results.sqlite").path).load()
        let register = try #require(results.metric(named: "http.latency", labels: "endpoint=POST /api/v1/mobile/devices/register,stack=sync"))
        #expect(results.histogram(register).totalCount == 6, "each of the six phones had its turn")
        // About 35 iterations in the ramp up (phone i from i/6 s), 60 in the hold, 35 down.
        let ok = try #require(results.metric(named: "loadtest.iterations", labels: "outcome=ok"))
        let perSecond = (results.series[ok.id] ?? []).sorted { $0.bucketStart < $1.bucketStart }.map(\.value)
        #expect(perSecond.count >= 3, "\(perSecond)")
        if perSecond.count >= 3 {
            #expect(perSecond[1] > perSecond[0] * 1.3 && perSecond[1] > perSecond[2] * 1.3, "the hold runs every phone, the ramps fewer: \(perSecond)")
            #expect(perSecond[0] >= 15 && perSecond[2] >= 15, "\(perSecond)")
        }
        let phones = try #require(results.metric(named: "loadtest.phones"))
        #expect((results.series[phones.id] ?? []).sorted { $0.bucketStart < $1.bucketStart }.map(\.value) == [6, 6, 0], "the stages' phones at each second's end")
        let page = try String(contentsOf: dir.appendingPathComponent("closed/dashboard.html"), encoding: .utf8)
        #expect(page.contains("<h2>Load over time</h2>") && page.contains("phones whose turn it is"))

        // Open: 20 arrivals a second reached over 1 s, then down to none over 1 s: 20 in all.
        let open = try await CommandRunner.fleetlabAsync(["loadtest", scenario, "--target", "sync=\(served.syncURL)", "--stages", "1s:20/s,1s:0/s",
                                                          "--devices", "4", "--out", "open", "--quiet"], in: dir,
                                                         environment: ["FLEETLAB_KEY_SYNC": served.rootKey])
        #expect(open.status == 0, "\(open.stdout)\(open.stderr)")
        #expect(open.stdout.contains("model       open: stages 1s:20/s,1s:0/s, pool of 4 phones"))
        let openResults = try ResultsDatabase.open(at: dir.appendingPathComponent("open/results.sqlite").path).load()
        #expect((19...20).contains(openResults.total(allLabelsOf: "loadtest.iterations")), "every arrival of the stages run or counted once")
        let rate = try #require(openResults.metric(named: "loadtest.arrival_rate"))
        #expect((openResults.series[rate.id] ?? []).sorted { $0.bucketStart < $1.bucketStart }.map(\.value) == [20, 0])
        let openPage = try String(contentsOf: dir.appendingPathComponent("open/dashboard.html"), encoding: .utf8)
        #expect(openPage.contains("arrivals a second scheduled") && !openPage.contains("phones whose turn it is"))
    }

    @Test("--shard I/N: two generators each run their share of staged phones against one server, and fleetlab merge makes one load test of them")
    func shardsMerge() async throws {
        let (served, dir, scenario) = try await servedLoad("load-shards-serve", "loadtest-shards")
        defer { served.stop() }
        let (url, key) = (served.syncURL, served.rootKey)
        async let first = CommandRunner.fleetlabAsync(["loadtest", scenario, "--target", "sync=\(url)", "--stages", "1s:6,1s:6,1s:0",
                                                       "--think", "100ms", "--shard", "0/2", "--out", "shard-0", "--quiet"], in: dir,
                                                      environment: ["FLEETLAB_KEY_SYNC": key])
        async let second = CommandRunner.fleetlabAsync(["loadtest", scenario, "--target", "sync=\(url)", "--stages", "1s:6,1s:6,1s:0",
                                                        "--think", "100ms", "--shard", "1/2", "--out", "shard-1", "--quiet"], in: dir,
                                                       environment: ["FLEETLAB_KEY_SYNC": key])
        let runs = try await [first, second]
        for run in runs {
            #expect(run.status == 0, "\(run.stdout)\(run.stderr)")
            #expect(run.stdout.contains("closed: up to 3 phones in stages 1s:6,1s:6,1s:0 (shard ") && run.stdout.contains("merge every shard's results"))
        }
        let merge = try await CommandRunner.fleetlabAsync(["merge", "merged/results.sqlite", "shard-0/results.sqlite", "shard-1/results.sqlite"], in: dir)
        #expect(merge.status == 0, "\(merge.stdout)\(merge.stderr)")
        let merged = try ResultsDatabase.open(at: dir.appendingPathComponent("merged/results.sqlite").path).load()
        let register = try #require(merged.metric(named: "http.latency", labels: "endpoint=POST /api/v1/mobile/devices/register,stack=sync"))
        #expect(merged.histogram(register).totalCount == 6, "the two generators ran the six phones between them")
        let phones = try #require(merged.metric(named: "loadtest.phones"))
        let each = try runs.indices.map { try ResultsDatabase.open(at: dir.appendingPathComponent("shard-\($0)/results.sqlite").path).load() }
        // Each generator's series is its own wall clock's; the merge moves each by its start's
        // distance from the earliest, in whole seconds. Started together they make [6, 6, 0];
        // on a loaded machine the second can start a second or more after the first.
        let starts = try each.map { try #require($0.runMetadata["started_at_unix_ms"].flatMap(Int64.init)) }
        var expected: [Int64: Double] = [:]
        for (shard, start) in zip(each, starts) {
            let own = try #require(shard.metric(named: "loadtest.phones"))
            #expect((shard.series[own.id] ?? []).sorted { $0.bucketStart < $1.bucketStart }.map(\.value) == [3, 3, 0])
            let shift = (start - starts.min()! + 500) / 1000 * 1_000_000_000
            for point in shard.series[own.id] ?? [] { expected[point.bucketStart + shift, default: 0] += point.value }
        }
        let series = (merged.series[phones.id] ?? []).sorted { $0.bucketStart < $1.bucketStart }
        #expect(series.map(\.bucketStart) == expected.keys.sorted() && series.map(\.value) == expected.keys.sorted().map { expected[$0]! })
        if abs(starts[0] - starts[1]) < 500 { #expect(series.map(\.value) == [6, 6, 0]) }
        #expect(merged.total("loadtest.iterations", labels: "outcome=ok") == each.reduce(0) { $0 + ($1.total("loadtest.iterations", labels: "outcome=ok") ?? 0) })
        #expect(merged.runMetadata["mode"] == "loadtest" && merged.runMetadata["model"]?.hasPrefix("2 generators: ") == true)
        #expect(merged.thresholds.count == 1 && merged.thresholdsPassed, "the sync p99 bound judged again on both generators' requests")
        let page = try String(contentsOf: dir.appendingPathComponent("merged/dashboard.html"), encoding: .utf8)
        #expect(page.contains("<title>Load test: load</title>") && page.contains("<h2>Load over time</h2>"))
    }

    @Test("an open model past what the server sustains: latency from the arrival rises with the wait, and arrivals that wait too long are dropped")
    func overload() async throws {
        let dir = TestPaths.scratchDirectory("loadtest")
        // A server that takes 60 ms per request: four phones manage about 66 iterations a second.
        let port = try ServedFleetlab.freePort()
        let server = Process()
        server.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        server.arguments = ["python3", "-c", """
            import http.server, time
            class Slow(http.server.BaseHTTPRequestHandler):
                protocol_version = "HTTP/1.1"
                def do_POST(self):
                    self.rfile.read(int(self.headers.get("content-length", 0)))
                    time.sleep(0.06)
                    body = b'{"commands": []}'
                    self.send_response(201 if self.path.endswith("/register") else 200)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                def log_message(self, *args): pass
            http.server.ThreadingHTTPServer(("127.0.0.1", \(port)), Slow).serve_forever()
            """]
        server.standardOutput = FileHandle.nullDevice
        server.standardError = FileHandle.nullDevice
        try server.run()
        // SIGKILL: a child may inherit a blocked SIGTERM from the test runner's thread.
        defer { kill(server.processIdentifier, SIGKILL); server.waitUntilExit() }
        let deadline = Date().addingTimeInterval(10)
        while (try? await HTTPProbe.request("POST", "http://127.0.0.1:\(port)/api/v1/mobile/devices/register", body: Data("{}".utf8))) == nil,
              Date() < deadline {
            try await Task.sleep(for: .milliseconds(100))
        }
        let scenario = try writeScenario(loadScenario(p99: "60s"), in: dir, name: "load.yaml")
        let run = try await CommandRunner.fleetlabAsync(["loadtest", scenario, "--target", "sync=http://127.0.0.1:\(port)", "--duration", "4s",
                                                         "--rate", "200", "--devices", "4", "--max-wait", "1s", "--out", "slow", "--quiet"], in: dir)
        #expect(run.status == 0, "\(run.stdout)\(run.stderr)")
        let results = try ResultsDatabase.open(at: dir.appendingPathComponent("slow/results.sqlite").path).load()
        #expect(results.total("loadtest.iterations", labels: "outcome=dropped") ?? 0 > 100, "\(run.stdout)")
        let sync = try #require(results.metric(named: "http.latency", labels: "endpoint=POST /api/v1/mobile/sync,stack=sync"))
        let first = results.histogram(sync, window: 0).value(atPercentile: 50)
        let later = results.histogram(sync, window: 2_000_000_000).value(atPercentile: 50)
        #expect(later > first + 300_000_000 && later > 500_000_000, "median latency from the arrival: first second \(first) ns, third \(later) ns")
        #expect(!run.stdout.contains("generator-bound"), "waiting for a phone is the server's saturation, not the generator's lag")
        // Phones are mid-request when the time is up; those requests finish into the last
        // bucket, so every iteration's sync is in the results.
        let iterations = (results.total("loadtest.iterations", labels: "outcome=ok") ?? 0) + (results.total("loadtest.iterations", labels: "outcome=failed") ?? 0)
        #expect(Double(results.histogram(sync).totalCount) == iterations)
    }

    @Test("Ctrl-C stops the test, writes the results so far and exits 130")
    func interrupted() async throws {
        let (served, dir, scenario) = try await servedLoad("load-serve", "loadtest")
        defer { served.stop() }
        let process = try CommandRunner.start(["loadtest", scenario, "--target", "sync=\(served.syncURL)", "--duration", "60s", "--devices", "4",
                                               "--out", "r", "--quiet"], in: dir, environment: ["FLEETLAB_KEY_SYNC": served.rootKey])
        let results = dir.appendingPathComponent("r/results.sqlite").path
        let deadline = Date().addingTimeInterval(20)
        while !FileManager.default.fileExists(atPath: results), Date() < deadline { try await Task.sleep(for: .milliseconds(100)) }
        try await Task.sleep(for: .seconds(2))
        kill(process.processIdentifier, SIGINT)
        let outcome = try await offPool { try CommandRunner.wait(for: process) }
        #expect(outcome.status == 130, "\(outcome.stdout)\(outcome.stderr)")
        #expect(outcome.stdout.contains("INTERRUPTED"))
        let loaded = try ResultsDatabase.open(at: results).load()
        #expect(loaded.runMetadata["interrupted"] == "true")
        #expect(loaded.total("loadtest.iterations", labels: "outcome=ok") ?? 0 > 0)
    }
}

@Suite("fleetlab bench loadtest")
struct LoadBenchTests {
    @Test("the bare NIO reference registers and syncs against fleetlab serve until its duration ends, and counts refused requests as failures")
    func bareReference() async throws {
        let served = try await ServedFleetlab.start(data: TestPaths.scratchDirectory("bare-serve").path)
        defer { served.stop() }
        let arguments = ["bench", "loadtest", "--bare-child", served.syncURL, "--users", "4", "--think", "50ms", "--duration", "2s"]
        let run = try await CommandRunner.fleetlabAsync(arguments, environment: ["FLEETLAB_KEY_SYNC": served.rootKey])
        #expect(run.status == 0, "\(run.stderr)")
        let figures = try #require(try? JSONValue.parse(String(run.stdout.split(separator: "\n").last ?? "")))
        let requests = figures["requests"]?.numberValue ?? 0
        #expect(requests >= 80 && requests <= 4 * 41 + 4, "4 users, 2 s, a sync every 50 ms each (and a registration): \(requests)")
        #expect(figures["failures"] == .number(0) && (figures["cpu_seconds"]?.numberValue ?? 0) > 0)
        #expect((figures["wall_seconds"]?.numberValue ?? 0) < 4, "it stops at its duration")

        let refused = try await CommandRunner.fleetlabAsync(arguments, environment: ["FLEETLAB_KEY_SYNC": "fl_wrong"])
        let answered = try #require(try? JSONValue.parse(String(refused.stdout.split(separator: "\n").last ?? "")))
        #expect((answered["requests"]?.numberValue ?? 0) > 40 && answered["failures"] == answered["requests"], "every request got a 401")
    }

    @Test("without Locust it says how to get it and exits 2; so does a round count out of range")
    func needsLocust() async throws {
        let result = try await CommandRunner.fleetlabAsync(["bench", "loadtest", "--locust", "/nonexistent/locust", "--duration", "2s"])
        #expect(result.status != 0)
        let missing = try await CommandRunner.fleetlabAsync(["bench", "loadtest", "--duration", "2s"], in: TestPaths.scratchDirectory("no-locust"),
                                                            environment: ["PATH": "/usr/bin:/bin"])
        #expect(missing.status == 2, "\(missing.stderr)")
        #expect(missing.stderr.contains("scripts/bench-loadtest installs it"))
        let rounds = try await CommandRunner.fleetlabAsync(["bench", "loadtest", "--rounds", "0", "--duration", "2s"])
        #expect(rounds.status == 2 && rounds.stderr.contains("--rounds must be 1...9"), "\(rounds.stderr)")
    }
}
