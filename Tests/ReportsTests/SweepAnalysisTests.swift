import Reports
import Simulator
import Testing

@Suite("Capacity sweep findings")
struct SweepAnalysisTests {
    static func point(_ devices: Int, chatBusy: Double, violated: [String] = []) -> SweepPoint {
        SweepPoint(devices: devices, resultsPath: "\(devices)/results.sqlite", endpoints: [],
                   servers: [.init(stack: "chat", peakUtilisation: chatBusy, meanUtilisation: chatBusy / 2, peakQueue: 0, waitP99: 0)],
                   violated: violated, wallSeconds: 1)
    }

    @Test("a progress check failing past the chat server's saturation is a finding; below it, or any other invariant, is a verdict")
    func progressPastSaturation() {
        let progress = InvariantLedger.progressChecks
        let overloaded = [Self.point(1_000, chatBusy: 40), Self.point(2_000, chatBusy: 100, violated: ["chat.sends_settle"]),
                          Self.point(4_000, chatBusy: 100, violated: ["chat.sends_settle"])]
        #expect(SweepAnalysis.verdicts(overloaded, progressChecks: progress).isEmpty)
        let findings = SweepAnalysis.findings(overloaded, bound: 1e9, progressChecks: progress)
        #expect(findings.contains("chat.sends_settle fails from 2,000 devices, past a server's saturation: it no longer keeps up"), "\(findings)")
        #expect(findings.contains { $0.hasPrefix("chat server saturates at about 2,000 devices") }, "\(findings)")

        let early = [Self.point(1_000, chatBusy: 40, violated: ["chat.sends_settle"]), Self.point(2_000, chatBusy: 100)]
        #expect(SweepAnalysis.verdicts(early, progressChecks: progress).map(\.devices) == [1_000])
        let safety = [Self.point(1_000, chatBusy: 40), Self.point(2_000, chatBusy: 100, violated: ["chat.no_duplicates"])]
        #expect(SweepAnalysis.verdicts(safety, progressChecks: progress).map(\.invariant) == ["chat.no_duplicates"])
        #expect(SweepAnalysis.findings(safety, bound: 1e9, progressChecks: progress).contains("invariant chat.no_duplicates FAILED at 2,000 devices (see its results)"))
    }

    @Test("a battery tail that grows with the fleet is a finding and a chart; one that holds is neither a finding nor hidden")
    func batteryTail() {
        func point(_ devices: Int, p99: Double) -> SweepPoint {
            SweepPoint(devices: devices, resultsPath: "\(devices)/results.sqlite", endpoints: [], servers: [],
                       deviceEnergy: [DeviceEnergySpread(stack: "all", population: nil, devices: UInt64(devices), p50: 1.5, p90: 4, p99: p99, max: p99 + 2)],
                       wallSeconds: 1)
        }
        let growing = [point(1_000, p99: 9.4), point(4_000, p99: 9.6), point(16_000, p99: 13.1)]
        #expect(SweepAnalysis.findings(growing, bound: 1e9)
            .contains("the phones that pay most spend more at scale: battery p99 (every stack) 9.4% a day at 1,000 devices, 13% at 16,000"))
        let steady = [point(1_000, p99: 9.4), point(16_000, p99: 9.9)]
        #expect(!SweepAnalysis.findings(steady, bound: 1e9).contains { $0.contains("battery") })
        let page = SweepDashboard.render(scenario: "s", seed: 1, points: steady, bound: 1e9)
        #expect(page.contains("Battery a day per device against fleet size"))
    }

    @Test("each stack's failure rate against the error budget: where it passes it, between which sizes, and a stack that stays under it")
    func failureRates() {
        func point(_ devices: Int, syncFailed: Double, chatFailed: Double = 0) -> SweepPoint {
            func endpoint(_ stack: String, _ route: String, failed: Double) -> EndpointFigure {
                EndpointFigure(stack: stack, endpoint: route, requests: 1_000, failures: failed, p50: 1e7, p90: 2e7, p99: 3e7)
            }
            return SweepPoint(devices: devices, resultsPath: "\(devices)/results.sqlite",
                              endpoints: [endpoint("sync", "POST /sync", failed: syncFailed), endpoint("sync", "POST /register", failed: 0),
                                          endpoint("chat", "POST /messages", failed: chatFailed)],
                              servers: [], wallSeconds: 1)
        }
        let points = [point(1_000, syncFailed: 2), point(2_000, syncFailed: 10), point(4_000, syncFailed: 90, chatFailed: 3)]
        let findings = SweepAnalysis.findings(points, bound: 1e9)
        #expect(findings.contains("sync failure rate passes 1.00% between 2,000 and 4,000 devices (0.50% → 4.50% of its requests)"), "\(findings)")
        #expect(findings.contains("chat: failure rate stays under 1.00% up to 4,000 devices (at most 0.30%)"), "\(findings)")
        #expect(SweepAnalysis.findings(points, bound: 1e9, errorBudget: 0.001)
            .contains { $0.hasPrefix("sync failure rate is past 0.10% already") } == false, "0.1 % is not past 0.1 %")
        #expect(SweepAnalysis.findings(points, bound: 1e9, errorBudget: 0.0005)
            .contains("sync failure rate is past 0.050% already at 1,000 devices (0.10% of its requests; 4.50% at 4,000)"))
        let page = SweepDashboard.render(scenario: "s", seed: 1, points: points, bound: 1e9)
        #expect(page.contains("<th class=\"num\">failed requests</th>") && page.contains(">3.10%<"), "93 of 3,000 at 4,000 devices")
    }

    @Test("the sweep page marks progress lost past saturation apart from a failed invariant")
    func pageMarks() {
        let points = [Self.point(1_000, chatBusy: 40), Self.point(2_000, chatBusy: 100, violated: ["chat.sends_settle"]),
                      Self.point(4_000, chatBusy: 100, violated: ["chat.per_sender_order"])]
        let page = SweepDashboard.render(scenario: "s", seed: 1, points: points, bound: 1e9, progressChecks: InvariantLedger.progressChecks)
        #expect(page.contains("<span class=\"overload\">chat.sends_settle</span>"))
        #expect(page.contains("<span class=\"fail\">chat.per_sender_order</span>"))
        #expect(!page.contains("<script"))
    }
}
