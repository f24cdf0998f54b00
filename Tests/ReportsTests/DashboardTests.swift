import Foundation
import Testing
import LabStore
import LabTestSupport
@testable import Reports
@testable import Simulator

@Suite("Dashboard")
struct DashboardTests {
    /// A small real run (40 devices, 3 hours, running workflows) with a description that
    /// tries to inject HTML.
    static func sampleRun() async throws -> (results: RunResults, directory: URL) {
        let dir = TestPaths.scratchDirectory("dashboard")
        let workflows = TestPaths.packageRoot.appendingPathComponent("simulations/workflows").path
        let scenario = try ScenarioLoader.parse(text: """
            name: dash
            description: "<script>alert('x')</script> & friends"
            seed: 5
            duration: 3h
            startAt: "21:00"
            devices:
              - {name: phones, count: 30, stacks: [workflows, sync, chat, agent, ai-bridge, desktop-bridge]}
              - {name: "kiosks", count: 10, lifecycle: kiosk, power: low-battery, stacks: [workflows, sync]}
            thresholds:
              - {metric: battery.level, percentile: 50, min: 1}
            workflows:
              run:
                - {sequence: \(workflows)/payment-verification.json, start: {poisson: 10m}}
            sync:
              operator: {thinkTime: 20}
            chat:
              groups: 3
              groupSize: [3, 5]
              messagesPerUserHour: 10
            agent:
              chatsPerDeviceDay: 24
            bridge:
              promptsPerPhoneDay: 100
              awakeUntil: "22:30"
              asleepShare: 30%
            desktop:
              promptsPerPhoneDay: 200
              asleepShare: 0%
            faults:
              - {kind: server-crash, at: 1h, duration: 15m, server: sync}
            """, file: "dash.yaml", directory: TestPaths.packageRoot.appendingPathComponent("simulations").path)
        let path = dir.appendingPathComponent("results.sqlite").path
        let results = try await cpuBound {
            _ = try FleetRun(scenario: scenario, resultsPath: path).run()
            return try ResultsDatabase.open(at: path).load()
        }
        return (results, dir)
    }

    @Test("the page has every panel, no script and nothing fetched from elsewhere")
    func selfContained() async throws {
        let html = Dashboard.render(try await Self.sampleRun().results)
        // `load` is a load test's own (its iterations and workload); a simulation has none.
        for id in DashboardLayout.simulation.panels where id != "load" {
            #expect(html.contains("id=\"\(id)\""), "panel \(id) missing")
        }
        #expect(!html.contains("id=\"load\""))
        #expect(!html.contains("<script"))
        #expect(!html.contains("src="))
        #expect(!html.contains("http://") && !html.contains("https://"))
        #expect(!html.contains("@import") && !html.contains("url("))
        #expect(html.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; friends"))
        #expect(html.contains("<svg"))
        // The workflow panels show the sequence, its steps and its outcomes.
        #expect(html.contains("<code>payment-verification</code>"))
        #expect(html.contains("<code>fraud_check</code>"))
        #expect(html.contains("<code>init_payment</code>"))
        // The sync panels, and the fault shaded on the time charts.
        #expect(html.contains("approval round trip") && html.contains("<title>server-crash"))
    }

    @Test("panels without data are left out")
    func emptyPanelsDisappear() {
        let empty = RunResults(scenario: ScenarioRow(name: "e", text: "", sha256: "", seed: 0, startTimeOfDay: 0,
                                                     durationNanoseconds: 3_600_000_000_000, bucketNanoseconds: 60_000_000_000,
                                                     devices: 0, tickMode: "fast-forward"))
        let html = Dashboard.render(empty)
        #expect(html.contains("id=\"summary\""))
        for id in ["battery", "power-states", "ticks", "lifecycle", "events", "workflows", "workflow-steps", "workflow-activity",
                   "workflow-latency", "workflow-ticks", "sync-latency", "sync-commands", "sync-outbox", "sync-server", "sync-cadence"] { #expect(!html.contains("id=\"\(id)\""), "\(id)") }
    }

    @Test("dashboards/simulation.json is the layout simulate uses, and bad layouts are explained")
    func layouts() throws {
        let file = TestPaths.packageRoot.appendingPathComponent("dashboards/simulation.json").path
        #expect(try DashboardLayout.load(path: file) == DashboardLayout.simulation)
        let dir = TestPaths.scratchDirectory()
        let bad = dir.appendingPathComponent("bad.json").path
        try #"{"title": "x", "panels": ["summary", "weather"]}"#.write(toFile: bad, atomically: true, encoding: .utf8)
        #expect { try DashboardLayout.load(path: bad) } throws: { "\($0)".contains("unknown panel 'weather'") }
        #expect { try DashboardLayout.load(path: dir.appendingPathComponent("none.json").path) } throws: { "\($0)".contains("cannot read") }
    }

    @Test("axes get round tick values")
    func ticks() {
        #expect(Ticks.nice(0, 1_000) == [0, 200, 400, 600, 800, 1_000])
        #expect(Ticks.nice(0, 7) == [0, 2, 4, 6])
        #expect(Ticks.niceMax(93) == 100)
        #expect(Ticks.time(durationNanoseconds: 6 * 3_600_000_000_000).count == 7)
        #expect(TimeLabeler(startTimeOfDay: 21 * 3_600_000_000_000).label(4 * 3_600_000_000_000) == "01:00")
    }

    @Test("a count axis that tops out at 1 labels 0 and 1 only; fault labels that would overlap go on rows below")
    func chartLabels() {
        let hour: Int64 = 3_600_000_000_000
        var chart = TimeChart(duration: 6 * hour, labeler: TimeLabeler(startTimeOfDay: 0), format: { MetricUnit.decimal($0, digits: 0) })
        chart.windows = [TimeChart.Window(name: "mass-app-kill", from: 4 * hour + hour / 2, to: 4 * hour + hour / 2),
                         TimeChart.Window(name: "push-outage", from: 4 * hour, to: 5 * hour),
                         TimeChart.Window(name: "partition", from: hour, to: 2 * hour)]
        let svg = chart.lines([TimeChart.Line(name: "queue", color: "#d64545", points: [(0, 0), (hour, 0)])])
        let yLabels = svg.matches(of: /class="ylabel">([^<]*)</).map { String($0.1) }
        #expect(yLabels == ["0", "1"])
        func row(_ name: String) -> String? {
            svg.firstMatch(of: try! Regex("y=\"([0-9.]+)\" class=\"xlabel\" text-anchor=\"start\" fill=\"#a33\">\(name)<"))
                .map { String($0.output[1].substring ?? "") }
        }
        #expect(row("partition") == row("push-outage"))
        #expect(row("mass-app-kill") != row("push-outage"))
    }

    @Test("headless Chromium renders the dashboard without a single network request")
    func chromium() async throws {
        let (results, dir) = try await Self.sampleRun()
        let page = dir.appendingPathComponent("dashboard.html")
        try Dashboard.render(results).write(to: page, atomically: true, encoding: .utf8)
        let load = try await cpuBound { try HeadlessChromium.load(file: page) }
        #expect(load.pageRequests.isEmpty, "the dashboard fetched \(load.pageRequests)")
        let png = try #require(load.screenshot)
        #expect(png.count > 20_000, "a blank page compresses to far less")
        #expect(png.prefix(8) == Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]))
    }

    @Test("the request detector does catch a page that fetches from elsewhere")
    func chromiumDetectorWorks() async throws {
        let dir = TestPaths.scratchDirectory()
        let page = dir.appendingPathComponent("leaky.html")
        try #"<!DOCTYPE html><html><body><img src="https://cdn.example.invalid/logo.png"></body></html>"#
            .write(to: page, atomically: true, encoding: .utf8)
        let load = try await cpuBound { try HeadlessChromium.load(file: page, width: 400, height: 300) }
        #expect(load.pageRequests == ["https://cdn.example.invalid/logo.png"])
    }

    @Test("a load test's last bucket is a rate over what it spanned: the iterations in flight at the end finish into it, and do not read as a spike")
    func loadRatesAtTheEnd() {
        // Three 1 s buckets; the run ended 4.5 s in, so the last bucket spanned 2.5 s.
        #expect(LoadPanel.perSecond([10, 10, 25], bucketSeconds: 1, wallSeconds: 4.5) == [10, 10, 10])
        // A run that ended on time (or a simulation, with no wall time) divides by the bucket.
        #expect(LoadPanel.perSecond([10, 10, 10], bucketSeconds: 1, wallSeconds: 3) == [10, 10, 10])
        #expect(LoadPanel.perSecond([4, 6], bucketSeconds: 2, wallSeconds: 0) == [2, 3])
    }
}
