import Foundation
import Testing
import LabKernel
import LabStore
import LabTestSupport

/// A scenario whose phones prompt the AI bridge: desktops that think 300 ms and stream three
/// words every 20 ms; one answer in two comes whole. (Each run draws afresh, its run tag
/// being the time: with one in four, a slow machine's eight answers were all streamed one
/// time in ten, and the test that wants both kinds failed in CI.)
let bridgeLoadScenario = """
    name: bridge-load
    seed: 8
    duration: 1h
    devices:
      - {name: phones, count: 4, stacks: [ai-bridge]}
    bridge: {think: 300ms, wordsPerChunk: 3, every: 20ms, wholeShare: 50%}
    thresholds:
      - {metric: bridge.first_chunk, percentile: 90, max: 10s}
      - {metric: http.latency, labels: {stack: ai-bridge}, percentile: 99, max: 10s}
    """

@Suite("fleetlab loadtest: the AI bridge relay", .serialized)
struct LoadtestBridgeTests {
    @Test("the AI bridge relay as a target: each phone pairs with a desktop the generator runs, and every prompt's answer comes back whole through the relay; no prompt reaches the relay's files or log")
    func prompts() async throws {
        let data = TestPaths.scratchDirectory("load-bridge-serve").path
        let served = try await ServedFleetlab.start(data: data, extra: ["--without", "ai-daemon"])
        defer { served.stop() }
        let dir = TestPaths.scratchDirectory("loadtest-bridge")
        let scenario = try writeScenario(bridgeLoadScenario, in: dir, name: "bridge.yaml")
        let run = try await CommandRunner.fleetlabAsync(["loadtest", scenario, "--target", "ai-bridge=\(served.aiBridgeURL)", "--duration", "3s",
                                                         "--devices", "4", "--think", "100ms", "--out", "out", "--quiet"], in: dir)
        #expect(run.status == 0, "\(run.stdout)\(run.stderr)")
        let results = try ResultsDatabase.open(at: dir.appendingPathComponent("out/results.sqlite").path).load()
        #expect(results.total("bridge.pairings", labels: "outcome=ok") == 4, "each phone paired with its own desktop")
        let chat = try #require(results.metric(named: "http.latency", labels: "endpoint=POST /v1/chat,stack=ai-bridge"))
        let answers = results.histogram(chat)
        #expect(answers.totalCount >= 8, "at least two prompts a phone in 3 s")
        #expect(results.total("http.failures", labels: "endpoint=POST /v1/chat,stack=ai-bridge") == 0, "every answer read as the desktop wrote it")
        #expect(results.total("bridge.requests", labels: "outcome=ok") == Double(answers.totalCount))
        let firstChunk = results.histogram(try #require(results.metric(named: "bridge.first_chunk")))
        #expect(firstChunk.totalCount >= 1 && firstChunk.totalCount < answers.totalCount, "streamed answers have a first chunk; whole ones (half) do not")
        // Each streamed answer went through a desktop that thinks 300 ms before its first word.
        #expect(firstChunk.value(atPercentile: 1) >= 297_000_000, "(a histogram bucket's lower bound: within 1 %)")
        #expect(run.stdout.contains("4 of 4 phones paired with their desktops"), "\(run.stdout)")
        #expect(run.stdout.contains("✓ p90(bridge.first_chunk)"), "\(run.stdout)")
        #expect(run.stdout.contains("on 1 event loop (the AI bridge desktops on threads of their own)"), "judged against all cores, not the loop's")
        let page = try String(contentsOf: dir.appendingPathComponent("out/dashboard.html"), encoding: .utf8)
        #expect(page.contains("POST /v1/chat") && page.contains("first chunk of an answer"))
        #expect(page.contains("Pairings, each phone with its desktop before the clock started: ok 4, refused 0"), "the bridge panel reads a load test's pairings")
        // Prompts are sealed to the desktop: the relay keeps and logs none of them.
        served.stop()
        #expect(!(served.output + served.remainingOutput()).contains("prompt-from-load-phone"))
        for file in try FileManager.default.subpathsOfDirectory(atPath: data) {
            let bytes = (try? Data(contentsOf: URL(fileURLWithPath: data).appendingPathComponent(file))) ?? Data()
            #expect(bytes.range(of: Data("prompt-from-load-phone".utf8)) == nil, "\(file) holds a prompt")
        }
    }

    @Test("pointed at a server that is not a relay: the desktops' tunnels are refused, so the phones stop waiting at once and the failure names the status")
    func notARelay() async throws {
        let served = try await ServedFleetlab.start(data: TestPaths.scratchDirectory("load-bridge-wrong-serve").path)
        defer { served.stop() }
        let dir = TestPaths.scratchDirectory("loadtest-bridge-wrong")
        let scenario = try writeScenario(bridgeLoadScenario, in: dir, name: "bridge.yaml")
        // The chat server refuses `/v1/tunnel`. Each phone used to wait out the request
        // deadline (here 30 s) for a desktop that would never connect, then say only that.
        let run = try await CommandRunner.fleetlabAsync(["loadtest", scenario, "--target", "ai-bridge=\(served.chatURL)", "--duration", "1s",
                                                         "--devices", "2", "--think", "200ms", "--request-timeout", "30s", "--out", "out", "--quiet"], in: dir)
        #expect(run.status == 3, "\(run.stdout)\(run.stderr)")
        let results = try ResultsDatabase.open(at: dir.appendingPathComponent("out/results.sqlite").path).load()
        #expect(results.total("bridge.pairings", labels: "outcome=offline") == 2)
        #expect(results.total("http.errors", labels: "endpoint=POST /v1/pair/confirm,reason=desktop tunnel HTTP 400,stack=ai-bridge") == 2, "\(run.stdout)")
        let waited = results.histogram(try #require(results.metric(named: "http.latency", labels: "endpoint=POST /v1/pair/confirm,stack=ai-bridge")))
        #expect(waited.value(atPercentile: 100) < 10_000_000_000, "not the 30 s deadline")
    }

    @Test("Ctrl-C while the desktops wait for a relay that is not there ends the set-up at once (not at the 60 s deadline): exit 130, and no pairing counted as failed")
    func interruptedSetUp() async throws {
        let dir = TestPaths.scratchDirectory("loadtest-bridge-interrupted")
        let scenario = try writeScenario(bridgeLoadScenario, in: dir, name: "bridge.yaml")
        let port = try ServedFleetlab.freePort()
        let process = try CommandRunner.start(["loadtest", scenario, "--target", "ai-bridge=http://127.0.0.1:\(port)", "--duration", "10s", "--devices", "2",
                                               "--request-timeout", "60s", "--out", "out", "--quiet"], in: dir)
        // The results file is made just before Ctrl-C is handled and the set-up begins.
        let results = dir.appendingPathComponent("out/results.sqlite").path
        let deadline = Date().addingTimeInterval(30)
        while !FileManager.default.fileExists(atPath: results), Date() < deadline { try await Task.sleep(for: .milliseconds(100)) }
        try await Task.sleep(for: .seconds(2))
        let interrupted = Date()
        kill(process.processIdentifier, SIGINT)
        let outcome = try await offPool { try CommandRunner.wait(for: process) }
        #expect(outcome.status == 130, "\(outcome.stdout)\(outcome.stderr)")
        #expect(Date().timeIntervalSince(interrupted) < 30, "the set-up's 60 s deadline was waited out")
        let loaded = try ResultsDatabase.open(at: results).load()
        #expect(loaded.runMetadata["interrupted"] == "true")
        #expect(loaded.total("bridge.pairings", labels: "outcome=offline") == nil, "an interrupted pairing is not the relay's failure")
    }

    @Test("a relay that is not there: desktops never connect, pairings and prompts fail by why within the request deadline")
    func relayDown() async throws {
        let dir = TestPaths.scratchDirectory("loadtest-bridge-down")
        let scenario = try writeScenario(bridgeLoadScenario, in: dir, name: "bridge.yaml")
        let port = try ServedFleetlab.freePort()
        let run = try await CommandRunner.fleetlabAsync(["loadtest", scenario, "--target", "ai-bridge=http://127.0.0.1:\(port)", "--duration", "1s",
                                                         "--devices", "2", "--think", "200ms", "--request-timeout", "500ms", "--out", "out", "--quiet"], in: dir)
        #expect(run.status == 3, "no answer, so the first-chunk threshold has no data and the latency one fails: \(run.stdout)\(run.stderr)")
        let results = try ResultsDatabase.open(at: dir.appendingPathComponent("out/results.sqlite").path).load()
        #expect(results.total("bridge.pairings", labels: "outcome=offline") == 2)
        #expect(results.total("http.errors", labels: "endpoint=POST /v1/pair/confirm,reason=desktop never connected,stack=ai-bridge") == 2)
        // A phone waits for its desktop as long as a request may take, then gives up.
        let waited = results.histogram(try #require(results.metric(named: "http.latency", labels: "endpoint=POST /v1/pair/confirm,stack=ai-bridge")))
        #expect(waited.value(atPercentile: 0) >= 495_000_000, "the 500 ms deadline, not less (a histogram bucket's lower bound: within 1 %)")
        #expect((results.total("http.errors", labels: "endpoint=POST /v1/chat,reason=not paired,stack=ai-bridge") ?? 0) >= 2, "an unpaired phone's prompt fails at once")
        #expect(run.stdout.contains("0 of 2 phones paired with their desktops"), "\(run.stdout)")
        let page = try String(contentsOf: dir.appendingPathComponent("out/dashboard.html"), encoding: .utf8)
        #expect(page.contains("AI bridge: requests and pairing") && page.contains("offline 2"), "no answer, yet the panel says why")
    }
}
