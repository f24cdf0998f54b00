import Foundation
import Testing
import LabTestSupport

extension ServeCommandTests {
    /// `fleetlab serve` started by a shell that then waits: the serve's pid, the shell's
    /// (its parent), and the serve's log, once it listens.
    func serveUnderShell(_ name: String, tied: Bool) async throws -> (serve: pid_t, parent: Process, log: URL) {
        let dir = TestPaths.scratchDirectory(name)
        let log = dir.appendingPathComponent("serve.log")
        let ports = ["host", "mobile-sync"].map { "--port \($0)=0" }.joined(separator: " ")
        let without = ["chat", "agent-runtime", "ai-bridge", "desktop-bridge"].map { "--without \($0)" }.joined(separator: " ")
        let shell = Process()
        shell.executableURL = URL(fileURLWithPath: "/bin/sh")
        shell.arguments = ["-c", "\(tied ? "FLEETLAB_EXIT_WITH_PARENT=1 " : "")'\(TestPaths.fleetlabExecutable.path)' serve --data '\(dir.path)/data' \(ports) \(without) "
                           + "> '\(log.path)' 2>&1 < /dev/null & echo $!; exec sleep 120"]
        let out = Pipe()
        shell.standardOutput = out
        try shell.run()
        let line = try await offPool { String(decoding: out.fileHandleForReading.availableData, as: UTF8.self) }
        let serve = try #require(pid_t(line.trimmingCharacters(in: .whitespacesAndNewlines)), "no pid: \(line)")
        let deadline = Date().addingTimeInterval(60)
        while !((try? String(contentsOf: log, encoding: .utf8))?.contains("listening") ?? false), Date() < deadline {
            try await Task.sleep(for: .milliseconds(100))
        }
        return (serve, shell, log)
    }

    /// Whether `pid` is a process that runs (not gone, not a zombie waiting to be reaped).
    static func runs(_ pid: pid_t) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return false }
        return !stat[close...].hasPrefix(") Z")
    }

    @Test("a serve a fleetlab parent tied to itself (a bench's) exits when that parent is killed alone; one started from a shell keeps serving when the shell goes")
    func exitsWithParent() async throws {
        let tied = try await serveUnderShell("serve-tied", tied: true)
        let free = try await serveUnderShell("serve-untied", tied: false)
        defer { kill(free.serve, SIGTERM) }
        for run in [tied, free] {
            #expect(Self.runs(run.serve), "\((try? String(contentsOf: run.log, encoding: .utf8)) ?? "")")
            kill(run.parent.processIdentifier, SIGKILL)
        }
        let deadline = Date().addingTimeInterval(20)
        while Self.runs(tied.serve), Date() < deadline { try await Task.sleep(for: .milliseconds(100)) }
        #expect(!Self.runs(tied.serve), "the tied serve outlived its parent")
        #expect(Self.runs(free.serve), "a serve started with & from a shell that exits goes on serving")
    }
}
