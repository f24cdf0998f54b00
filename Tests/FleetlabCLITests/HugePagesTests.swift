import Foundation
import Testing
import LabTestSupport

/// `simulate` asks glibc for 2 MiB pages where the kernel gives them only on request
/// (docs/benchmarks.md, "Huge pages"): seen from outside, in the running process's
/// environment and its memory map.
@Suite("fleetlab simulate on huge pages")
struct HugePagesTests {
    static let kernelMode = try? String(contentsOfFile: "/sys/kernel/mm/transparent_hugepage/enabled", encoding: .utf8)

    /// Starts a long run, reads `/proc/<pid>/environ` and `smaps_rollup` while it runs, then
    /// interrupts it. Returns the tunables the running process had and its huge-page kB.
    func observe(environment: [String: String]) async throws -> (tunables: String?, hugeKB: Int) {
        let dir = TestPaths.scratchDirectory("cli")
        let scenario = try writeScenario(quickScenario.replacingOccurrences(of: "duration: 2h", with: "duration: 30d")
            .replacingOccurrences(of: "count: 40", with: "count: 20000"), in: dir)
        let process = try CommandRunner.start(["simulate", scenario, "--out", "r", "--quiet"], in: dir, environment: environment)
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
        let pid = process.processIdentifier
        // The re-exec happens before the arguments are parsed; the results file appears
        // once the run has begun, after which the environment is the final one.
        let deadline = Date().addingTimeInterval(120)
        while !FileManager.default.fileExists(atPath: dir.appendingPathComponent("r/results.sqlite").path), Date() < deadline {
            try await Task.sleep(for: .milliseconds(100))
        }
        try await Task.sleep(for: .seconds(1))
        let environ = (try? Data(contentsOf: URL(fileURLWithPath: "/proc/\(pid)/environ"))) ?? Data()
        let tunables = environ.split(separator: 0).compactMap { String(decoding: $0, as: UTF8.self) as String? }
            .first { $0.hasPrefix("GLIBC_TUNABLES=") }.map { String($0.dropFirst("GLIBC_TUNABLES=".count)) }
        let rollup = (try? String(contentsOfFile: "/proc/\(pid)/smaps_rollup", encoding: .utf8)) ?? ""
        let huge = rollup.split(separator: "\n").first { $0.hasPrefix("AnonHugePages:") }
            .flatMap { $0.split(separator: " ").dropFirst().first.flatMap { Int($0) } } ?? 0
        kill(pid, SIGINT)
        try await offPool { process.waitUntilExit() }  // off the cooperative pool, which other tests' servers need
        #expect(process.terminationStatus == 130, "the re-executed run still stops cleanly on Ctrl-C")
        return (tunables, huge)
    }

    static var madvise: Bool { kernelMode?.contains("[madvise]") == true }

    @Test("a simulation runs on huge pages when the kernel gives them on request, keeping other tunables",
          .enabled(if: madvise))
    func onRequest() async throws {
        let plain = try await observe(environment: [:])
        #expect(plain.tunables == "glibc.malloc.hugetlb=1")
        #expect(plain.hugeKB >= 2048, "2 MiB pages back the run's heap")
        // glibc rewrites the variable's text in place as it parses it, so only the first
        // tunable is readable from outside; the pages show the added one took effect.
        let other = try await observe(environment: ["GLIBC_TUNABLES": "glibc.malloc.arena_max=2"])
        #expect(other.tunables?.hasPrefix("glibc.malloc.arena_max=2") == true)
        #expect(other.hugeKB >= 2048)
    }

    @Test("FLEETLAB_HUGE_PAGES=0, or the user's own hugetlb setting, leaves the process as it was started")
    func optOut() async throws {
        let off = try await observe(environment: ["FLEETLAB_HUGE_PAGES": "0"])
        #expect(off.tunables == nil)
        let own = try await observe(environment: ["GLIBC_TUNABLES": "glibc.malloc.hugetlb=0"])
        #expect(own.tunables == "glibc.malloc.hugetlb=0")
        if Self.madvise {
            #expect(off.hugeKB == 0, "in madvise mode only memory that asks gets huge pages")
            #expect(own.hugeKB == 0)
        }
    }
}
