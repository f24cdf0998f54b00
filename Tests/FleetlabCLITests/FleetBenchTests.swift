import Foundation
import LabTestSupport
import Testing

@Suite("fleetlab bench fleet")
struct FleetBenchTests {
    /// The figure of one row: its columns after the stack set's name.
    static func row(_ name: String, in output: String) -> [String]? {
        guard let line = output.split(separator: "\n").first(where: { $0.hasPrefix("  \(name) ") }) else { return nil }
        return line.dropFirst(2 + name.count).split(separator: " ", omittingEmptySubsequences: true).map(String.init)
    }

    @Test("each stack set runs in a process of its own and reports its pace and memory; the stacks cost more than the device model alone")
    func stackSets() async throws {
        let result = try await CommandRunner.fleetlabAsync(["bench", "fleet", "--devices", "60", "--duration", "2h"])
        #expect(result.status == 0, "\(result.stderr)")
        for name in ["device model", "workflows", "workflows + sync", "chat", "agent", "ai-bridge", "desktop-bridge", "full stack"] {
            let columns = try #require(Self.row(name, in: result.stdout), "\(name): \(result.stdout)")
            #expect(columns.contains("MiB"), "\(name): \(columns)")
        }
        // Device-seconds per wall second: the device model alone outpaces the full stack.
        let pace = { (name: String) -> Double in
            let columns = Self.row(name, in: result.stdout) ?? []
            return Double(columns.dropFirst().first?.filter { $0.isNumber || $0 == "." } ?? "") ?? 0
        }
        #expect(pace("device model") > pace("full stack") && pace("full stack") > 0, "\(result.stdout)")
        #expect(result.stdout.contains("full stack at this pace: 10,000 devices × 24 h in"))
    }

    @Test("--only picks stack sets by name; an unknown one is exit status 2 naming the sets")
    func only() async throws {
        let one = try await CommandRunner.fleetlabAsync(["bench", "fleet", "--devices", "20", "--duration", "30m", "--only", "chat"])
        #expect(one.status == 0, "\(one.stderr)")
        #expect(Self.row("chat", in: one.stdout) != nil && Self.row("device model", in: one.stdout) == nil, "\(one.stdout)")
        let bad = try await CommandRunner.fleetlabAsync(["bench", "fleet", "--only", "gpu"])
        #expect(bad.status == 2 && bad.stderr.contains("no stack set 'gpu'") && bad.stderr.contains("full stack"), "\(bad.stderr)")
        let devices = try await CommandRunner.fleetlabAsync(["bench", "fleet", "--devices", "0"])
        #expect(devices.status == 2 && devices.stderr.contains("--devices"))
    }
}
