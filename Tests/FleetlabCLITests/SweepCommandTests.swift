import Foundation
import Testing
import LabKernel
import LabStore
import LabTestSupport

@Suite("fleetlab sweep")
struct SweepCommandTests {
    /// Chatting phones on screen all the time, against a chat server with one slow worker:
    /// its queue is empty at the small sizes and runs away past the knee.
    static let slowChat = """
    name: knee
    seed: 5
    duration: 40m
    startAt: "12:00"
    devices:
      - {name: kiosks, count: 20, lifecycle: kiosk, network: wifi-only, stacks: [chat]}
    chat:
      groups: 4
      groupSize: [3, 5]
      messagesPerUserHour: 30
      server: {workers: 1, serviceTime: 400ms, queueLimit: 100000}
    """

    @Test("a sweep over four sizes runs each with the same seed, writes each point's results, and finds where the chat server saturates and its wait grows")
    func chatQueueKnee() async throws {
        let dir = TestPaths.scratchDirectory("sweep")
        let scenario = try writeScenario(Self.slowChat, in: dir, name: "knee.yaml")
        let result = try await CommandRunner.fleetlabAsync(["sweep", scenario, "--devices", "10..80x2", "--out", "s", "--quiet",
                                                            "--latency-budget", "3s"], in: dir)
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        let sizes = [10, 20, 40, 80]
        var waits: [Double] = [], utilisation: [Double] = []
        for size in sizes {
            let results = try ResultsDatabase.open(at: dir.appendingPathComponent("s/\(size)/results.sqlite").path).load()
            #expect(results.scenario.devices == size && results.scenario.seed == 5)
            #expect(FileManager.default.fileExists(atPath: dir.appendingPathComponent("s/\(size)/dashboard.html").path))
            let wait = try #require(results.metric(named: "chat.server_wait"))
            waits.append(Double(results.histogram(wait).value(atPercentile: 99)))
            let busy = try #require(results.metric(named: "chat.server_utilisation"))
            utilisation.append((results.series[busy.id] ?? []).map(\.value).max() ?? 0)
        }
        // Below the knee the load grows with the fleet and the wait for a worker stays near
        // a service time; past it the worker is always busy and every client waits behind
        // the others.
        #expect(utilisation[1] > utilisation[0] * 1.5 && utilisation[0] < 50, "\(utilisation)")
        #expect(utilisation[3] >= 95, "\(utilisation)")
        #expect(waits[3] > 5 * waits[1], "p99 waits \(waits)")
        let saturation = try #require(result.stdout.split(separator: "\n").first { $0.contains("chat server saturates at about") })
        let estimate = Int(saturation.split(separator: " ").first { Int($0.filter(\.isNumber)) != nil && $0.contains(",") || Int($0) != nil }?.filter(\.isNumber) ?? "") ?? 0
        #expect(estimate > 10 && estimate <= 80, "\(saturation)")
        #expect(result.stdout.contains("passes 3.00s between 40 and 80 devices"), "\(result.stdout)")
        #expect(result.stdout.contains("chat: failure rate stays under 1.00% up to 80 devices"), "\(result.stdout)")
        let page = try String(contentsOf: dir.appendingPathComponent("s/sweep.html"), encoding: .utf8)
        #expect(page.contains("<svg") && page.contains("chat server saturates") && !page.contains("<script"))
    }

    @Test("sizes are a list or a range with a factor; anything else is refused with exit status 2")
    func sizes() async throws {
        let dir = TestPaths.scratchDirectory("sweep")
        let scenario = try writeScenario(quickScenario, in: dir)
        for bad in ["0,10", "10..5x2", "10..100x1", "ten", "5,,6"] {
            let result = try await CommandRunner.fleetlabAsync(["sweep", scenario, "--devices", bad, "--quiet"], in: dir)
            #expect(result.status == 2, "\(bad): \(result.stderr)")
        }
        for bad in ["0%", "100%", "lots", "1.5"] {
            let result = try await CommandRunner.fleetlabAsync(["sweep", scenario, "--devices", "20", "--error-budget", bad, "--quiet"], in: dir)
            #expect(result.status == 2 && result.stderr.contains("--error-budget \(bad): expected a share"), "\(bad): \(result.stderr)")
        }
        let result = try await CommandRunner.fleetlabAsync(["sweep", scenario, "--devices", "20..50x2", "--duration", "20m", "--out", "r", "--quiet"], in: dir)
        #expect(result.status == 0, "\(result.stderr)")
        for size in [20, 40, 50] {
            #expect(FileManager.default.fileExists(atPath: dir.appendingPathComponent("r/\(size)/results.sqlite").path), "\(size)")
        }
    }
}
