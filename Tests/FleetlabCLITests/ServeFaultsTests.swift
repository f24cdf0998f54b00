import Foundation
import Testing
import LabKernel
import LabStore
import LabTestSupport

/// One at a time: each test starts a whole `fleetlab serve` (a worker process per server),
/// and on CI's two cores four at once beside the rest of the suite starved the load test
/// past its time limit.
@Suite("fleetlab serve --faults", .serialized)
struct ServeFaultsTests {
    /// What `/version` says of one server.
    func listing(_ served: ServedFleetlab, _ name: String) async throws -> [String: Any] {
        let version = try await HTTPProbe.get(served.hostURL + "/version")
        return try #require(((version.json as? [String: Any])?["servers"] as? [[String: Any]])?.first { $0["name"] as? String == name })
    }

    @Test("a brownout slows its server's answers; errors fail its requests with 503 and its sockets with 1013; a crash window takes its server off its port and brings it back over the same data",
          .timeLimit(.minutes(2)))
    func brownoutAndOutage() async throws {
        let data = TestPaths.scratchDirectory("serve-faults").path
        let plan = TestPaths.scratchDirectory("serve-faults-plan").appendingPathComponent("faults.yaml")
        func writePlan(crashAt: String) throws {
            try """
            faults:
              - {kind: server-slowdown, server: sync, at: 0s, duration: 1h, factor: 200}
              - {kind: server-crash, server: chat, at: \(crashAt), duration: 3s}
              - {kind: server-errors, server: agent, at: 0s, duration: 1h, fraction: 100%}
              - {kind: server-errors, server: ai-bridge, at: 0s, duration: 1h, fraction: 100%}
            """.write(to: plan, atomically: true, encoding: .utf8)
        }
        try writePlan(crashAt: "20s")
        let served = try await ServedFleetlab.start(data: data, extra: ["--faults", plan.path])
        defer { served.stop() }
        #expect(served.output.contains("mobile-sync slowed ×200 from +0s for 1h (server-slowdown)"))
        #expect(served.output.contains("chat down from +20s for 3s (server-crash)"))
        // First, before the chat server's window opens: an account to look for after it.
        let json = ["content-type": "application/json"]
        let account = Data(#"{"username":"outlasts","password":"long enough pass"}"#.utf8)
        #expect(try await HTTPProbe.request("POST", served.chatURL + "/api/v1/auth/register", body: account, headers: json).status == 201)
        let before = try await listing(served, "chat")
        #expect(before["fault"] == nil)

        // Sync's service time is 4 ms at the median: ×200 holds a request about 0.8 s.
        var slowest = 0.0
        for _ in 0..<3 {
            let start = Date()
            #expect(try await HTTPProbe.request("GET", served.syncURL + "/api/v1/mobile/devices", headers: ["x-api-key": served.rootKey]).status == 200)
            slowest = max(slowest, Date().timeIntervalSince(start))
        }
        #expect(slowest > 0.15, "three sync requests in a ×200 brownout took at most \(slowest) s")
        #expect(try await listing(served, "mobile-sync")["fault"] as? String == "slowed ×200")
        // Every request of a 100 % error window is a 503 the client can retry, before the
        // server sees it.
        for url in [served.agentURL + "/api/workflows", served.aiBridgeURL + "/v1/pair/confirm"] {
            let failed = try await HTTPProbe.request("POST", url, body: Data("{}".utf8), headers: ["content-type": "application/json"])
            #expect(failed.status == 503 && failed.headers["retry-after"] == "5" && failed.text.contains("failing requests"), "\(url): \(failed.status) \(failed.text)")
        }
        #expect(try await listing(served, "agent-runtime")["fault"] as? String == "failing 100% of requests")
        // A socket's upgrade is a request too: the agent runtime's socket opens only to be
        // closed with 1013 (try again later), as the simulated server turns one away.
        let agentPort = try #require(URLComponents(string: served.agentURL)?.port)
        let closed = try await offPool { try WebSocketProbe(port: agentPort, target: "/ws/flow/app/chat/user").receive(timeout: 5) }
        #expect(closed == .close(1013))

        // The window opens: nothing listens on the chat port, and /version says why. The plan
        // is saved again first, so its clock starts from here (serve plays a saved plan from
        // the save): on a loaded machine the steps above can outlast the first plan's +20 s
        // window, which then closed before anyone looked.
        try writePlan(crashAt: "5s")
        var down: [String: Any] = [:]
        for _ in 0..<300 where down["fault"] as? String != "down" {
            try await Task.sleep(for: .milliseconds(100))
            down = try await listing(served, "chat")
        }
        #expect(down["fault"] as? String == "down")
        await #expect(throws: (any Error).self) { _ = try await HTTPProbe.get(served.chatURL + "/.well-known/d3chat-server") }

        // It closes: the same port, a new process, the account still there, no restart counted.
        var back: [String: Any] = [:]
        for _ in 0..<300 {
            try await Task.sleep(for: .milliseconds(100))
            back = try await listing(served, "chat")
            if back["fault"] == nil, (try? await HTTPProbe.get(served.chatURL + "/.well-known/d3chat-server"))?.status == 200 { break }
        }
        #expect(back["fault"] == nil && back["port"] as? Int == before["port"] as? Int && back["pid"] as? Int != before["pid"] as? Int)
        #expect(back["restarts"] as? Int == 0)
        #expect(try await HTTPProbe.request("POST", served.chatURL + "/api/v1/auth/login", body: account, headers: json).status == 200)
        served.stop()
        let logs = served.remainingOutput()
        #expect(logs.contains("fault: the chat server is down (server-crash)") && logs.contains("fault over: starting the chat server again"))
    }

    @Test("a brownout holds the frames a client sends on an open socket, as it holds requests, and keeps their order",
          .timeLimit(.minutes(2)))
    func brownoutHoldsFrames() async throws {
        let data = TestPaths.scratchDirectory("serve-faults-frames").path
        let plan = TestPaths.scratchDirectory("serve-faults-frames-plan").appendingPathComponent("faults.yaml")
        // The chat server's service time is 2 ms at the median: ×500 holds each about 1 s.
        try "faults:\n  - {kind: server-slowdown, server: chat, at: 0s, duration: 1h, factor: 500}\n".write(to: plan, atomically: true, encoding: .utf8)
        let served = try await ServedFleetlab.start(data: data, extra: ["--faults", plan.path])
        defer { served.stop() }
        let json = ["content-type": "application/json"]
        let account = Data(#"{"username":"framed","password":"long enough pass"}"#.utf8)
        let registered = try await HTTPProbe.request("POST", served.chatURL + "/api/v1/auth/register", body: account, headers: json)
        let token = try #require((registered.json as? [String: Any])?["access_token"] as? String, "\(registered.status) \(registered.text)")
        let ticketed = try await HTTPProbe.request("POST", served.chatURL + "/api/v1/auth/ws-ticket", headers: ["authorization": "Bearer \(token)"])
        let ticket = try #require((ticketed.json as? [String: Any])?["ticket"] as? String, "\(ticketed.status) \(ticketed.text)")
        let port = try #require(URLComponents(string: served.chatURL)?.port)
        // Two frames the server answers with an error each, sent together: each answer comes
        // only after its hold, and in the order sent.
        let (answers, waited) = try await offPool { () throws -> ([String], Double) in
            let socket = try WebSocketProbe(port: port, target: "/ws?ticket=\(ticket)")
            let start = Date()
            try socket.send(#"{"type":"first"}"#)
            try socket.send(#"{"type":"second"}"#)
            var answers: [String] = []
            while answers.count < 2, let frame = try socket.receive(timeout: 20) {
                if case .text(let text) = frame, text.contains("Unknown message type") { answers.append(text) }
            }
            return (answers, Date().timeIntervalSince(start))
        }
        #expect(answers.count == 2 && answers[0].contains("'first'") && answers[1].contains("'second'"), "\(answers)")
        #expect(waited > 0.3, "two frames in a ×500 brownout were answered in \(waited) s")
    }

    @Test("saving the plan again plays it from that moment: a fault written at 0s starts at once, `faults: []` ends it, and a file that does not read keeps the plan before it",
          .timeLimit(.minutes(2)))
    func planSavedAgain() async throws {
        let data = TestPaths.scratchDirectory("serve-faults-saved").path
        let plan = TestPaths.scratchDirectory("serve-faults-saved-plan").appendingPathComponent("faults.yaml")
        try "faults: []\n".write(to: plan, atomically: true, encoding: .utf8)
        let served = try await ServedFleetlab.start(data: data, extra: ["--faults", plan.path])
        defer { served.stop() }
        let workflows = served.agentURL + "/api/workflows"
        func agentStatus() async throws -> Int { try await HTTPProbe.get(workflows).status }
        func chatAnswers() async -> Bool { (try? await HTTPProbe.get(served.chatURL + "/.well-known/d3chat-server"))?.status == 200 }
        /// Polls `condition` for up to 10 s (the plan is looked at every half second).
        func eventually(_ condition: () async throws -> Bool) async throws -> Bool {
            for _ in 0..<100 {
                if try await condition() { return true }
                try await Task.sleep(for: .milliseconds(100))
            }
            return false
        }
        #expect(try await agentStatus() != 503)
        #expect(await chatAnswers())

        try """
        faults:
          - {kind: server-errors, server: agent, at: 0s, duration: 1h, fraction: 100%}
          - {kind: server-crash, server: chat, at: 0s, duration: 1h}
        """.write(to: plan, atomically: true, encoding: .utf8)
        #expect(try await eventually { try await agentStatus() == 503 }, "the errors window opened when the plan was saved")
        #expect(try await eventually { await !chatAnswers() }, "the chat server went down when the plan was saved")

        try "faults: [{kind: server-crash".write(to: plan, atomically: true, encoding: .utf8)
        try await Task.sleep(for: .seconds(1.5))
        #expect(try await agentStatus() == 503, "a plan that does not read changes nothing")

        try "faults: []\n".write(to: plan, atomically: true, encoding: .utf8)
        #expect(try await eventually { try await agentStatus() != 503 }, "`faults: []` ended the errors window")
        #expect(try await eventually { await chatAnswers() }, "and brought the chat server back")
        served.stop()
        let logs = served.remainingOutput()
        #expect(logs.contains("faults.yaml was saved: its plan plays from now"), "\(logs)")
        #expect(logs.contains("cannot be played, so the plan before it goes on"), "\(logs)")
    }

    @Test("a plan serve cannot play is exit status 2 with the reason")
    func badPlans() async throws {
        let data = TestPaths.scratchDirectory("serve-faults-bad").path
        let folder = TestPaths.scratchDirectory("serve-faults-bad-plans")
        let ports = ["--port", "host=0", "--port", "mobile-sync=0", "--port", "chat=0", "--port", "agent-runtime=0", "--port", "ai-bridge=0", "--port", "desktop-bridge=0"]
        let cases: [(plan: String, extra: [String], says: String)] = [
            ("faults:\n  - {kind: radio-off, at: 1m, duration: 1m}\n", [],
             "a radio-off acts on simulated phones or networks; `fleetlab serve` plays server-crash, server-slowdown and server-errors"),
            ("every: 1m\nfaults:\n  - {kind: server-crash, server: chat, at: 50s, duration: 20s}\n", [],
             "its last fault ends at 1m10s"),
            ("faults:\n  - {kind: server-slowdown, server: agent, at: 1m, duration: 1m, factor: 0.5}\n", [], "more than 1 and at most 1000"),
            ("faults:\n  - {kind: server-crash, server: chat, at: 1m, duration: 1m}\n", ["--without", "chat"],
             "a server-crash of the chat server, which this run does not start"),
        ]
        for (index, entry) in cases.enumerated() {
            let file = folder.appendingPathComponent("plan\(index).yaml")
            try entry.plan.write(to: file, atomically: true, encoding: .utf8)
            let result = try await CommandRunner.fleetlabAsync(["serve", "--data", data, "--faults", file.path] + ports + entry.extra)
            #expect(result.status == 2 && result.stderr.contains(entry.says), "\(entry.plan): \(result.stderr)")
        }
        let missing = try await CommandRunner.fleetlabAsync(["serve", "--data", data, "--faults", folder.appendingPathComponent("none.yaml").path] + ports)
        #expect(missing.status == 2 && missing.stderr.contains("no such file"))
    }

    @Test("a scenario's server fault plays in serve, and the same scenario's load test measures it and says what it did not inject",
          .timeLimit(.minutes(2)))
    func loadtestThroughBrownout() async throws {
        let dir = TestPaths.scratchDirectory("serve-faults-loadtest")
        let scenario = try writeScenario(loadScenario(p99: "30s", extra: """
        faults:
          - {kind: server-slowdown, server: sync, at: 0s, duration: 1h, factor: 100}
          - {kind: radio-off, at: 30m, duration: 1m, fraction: 10%}
        """), in: dir, name: "brownout.yaml")
        let served = try await ServedFleetlab.start(data: TestPaths.scratchDirectory("serve-faults-loadtest-data").path, extra: ["--faults", scenario])
        defer { served.stop() }
        #expect(served.output.contains("skipped 1 (radio-off): they act on simulated phones or networks"))
        let run = try await CommandRunner.fleetlabAsync(["loadtest", scenario, "--target", "sync=\(served.syncURL)", "--key", "sync=\(served.rootKey)",
                                                         "--duration", "3s", "--devices", "4", "--think", "100ms", "--out", "run"], in: dir)
        #expect(run.status == 0, "\(run.stdout)\(run.stderr)")
        #expect(run.stdout.contains("faults      2 in the scenario, not injected: a load test drives real targets as they are "
            + "(its 1 server fault plays on the wall clock in `fleetlab serve --faults SCENARIO`)"), "\(run.stdout)")
        let results = try ResultsDatabase.open(at: dir.appendingPathComponent("run/results.sqlite").path).load()
        let sync = try #require(results.metric(named: "http.latency", labels: "endpoint=POST /api/v1/mobile/sync,stack=sync"))
        // ×100 of a 4 ms median: about 0.4 s a request instead of about a millisecond.
        #expect(results.histogram(sync).value(atPercentile: 50) > 150_000_000, "the load test saw the brownout")
    }
}
