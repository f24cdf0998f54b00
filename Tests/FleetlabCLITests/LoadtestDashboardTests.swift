import Foundation
import Testing
import LabKernel
import LabStore
import LabTestSupport

@Suite("fleetlab loadtest --dashboard-port", .serialized)
struct LoadtestDashboardTests {
    @Test("while the run goes on, 127.0.0.1 serves the dashboard of the results so far and the page reloads itself; at the end it stops; nothing else answers, and Ctrl-C still stops the run")
    func liveDashboard() async throws {
        // A p99 bound no real request meets: the page shows it failing while the run goes on.
        let (served, dir, scenario) = try await servedLoad("load-live-serve", "loadtest-live", scenario: loadScenario(p99: "1us"))
        defer { served.stop() }
        let process = try CommandRunner.start(["loadtest", scenario, "--target", "sync=\(served.syncURL)", "--duration", "60s", "--devices", "4",
                                               "--think", "100ms", "--out", "r", "--quiet", "--dashboard-port", "0"], in: dir,
                                              environment: ["FLEETLAB_KEY_SYNC": served.rootKey])
        // The URL is the first line, printed before the run starts.
        let stdout = try #require(process.standardOutput as? Pipe).fileHandleForReading
        let first = try await offPool { () -> String in
            var text = ""
            let deadline = Date().addingTimeInterval(30)
            while !text.contains("\n") && Date() < deadline {
                let chunk = stdout.availableData
                if chunk.isEmpty { break }
                text += String(decoding: chunk, as: UTF8.self)
            }
            return text
        }
        let url = try #require(first.split(separator: " ").first { $0.hasPrefix("http://127.0.0.1:") }.map(String.init), "\(first)")
        // Once a bucket or two is written the page charts them.
        var page = try await HTTPProbe.get(url)
        let deadline = Date().addingTimeInterval(20)
        while !(page.status == 200 && page.text.contains("ok a second at")) && Date() < deadline {
            try await Task.sleep(for: .milliseconds(200))
            page = try await HTTPProbe.get(url)
        }
        #expect(page.status == 200 && page.headers["content-type"]?.hasPrefix("text/html") == true)
        #expect(page.text.contains("<title>Load test: load</title>") && page.text.contains("live against sync=\(served.syncURL)"))
        #expect(page.text.contains("<meta http-equiv=\"refresh\" content=\"2\">"), "the page reloads itself while the run goes on")
        #expect(page.text.contains("The run is still going: these are the thresholds on the results so far; the verdict is on the whole run, at the end."))
        #expect(page.text.contains("<tr class=\"bad\"><td><span class=\"fail\">✗ so far</span></td><td><code>http.latency{stack=sync}</code>"),
                "the p99 bound is failing on the results so far")
        #expect(page.text.contains("0/1 so far"), "the summary card counts the thresholds passing so far, of those a load test judges")
        #expect(!page.text.contains(served.rootKey), "the key is not on the page")
        let missing = try await HTTPProbe.get(url + "results.sqlite")
        #expect(missing.status == 404 && missing.text == #"{"error":"not found"}"#, "the page is all it serves")
        // It listens on 127.0.0.1 only: another address of this machine finds nothing there.
        await #expect(throws: (any Error).self) { _ = try await HTTPProbe.get(url.replacingOccurrences(of: "127.0.0.1", with: "127.0.0.2")) }
        kill(process.processIdentifier, SIGINT)
        let outcome = try await offPool { try CommandRunner.wait(for: process) }
        #expect(outcome.status == 130, "Ctrl-C is the load test's, not the page server's: \(outcome.stdout)\(outcome.stderr)")
        let loaded = try ResultsDatabase.open(at: dir.appendingPathComponent("r/results.sqlite").path).load()
        #expect(loaded.runMetadata["interrupted"] == "true" && (loaded.total("loadtest.iterations", labels: "outcome=ok") ?? 0) > 0)
        let file = try String(contentsOf: dir.appendingPathComponent("r/dashboard.html"), encoding: .utf8)
        #expect(!file.contains("http-equiv=\"refresh\"") && file.contains("<h2>Thresholds</h2>") && !file.contains("still going"))
        await #expect(throws: (any Error).self) { _ = try await HTTPProbe.get(url) }
    }
}
