public import Foundation

/// Runs the `fleetlab` executable the way a user does and captures what it prints.
public enum CommandRunner {
    public struct Result: Sendable {
        public var status: Int32
        public var stdout: String
        public var stderr: String
    }

    /// Runs `fleetlab arguments` in `directory` and waits for it to exit.
    public static func fleetlab(_ arguments: [String], in directory: URL? = nil) throws -> Result {
        try wait(for: start(arguments, in: directory))
    }

    /// Runs another program (`xmllint`, …) the same way.
    public static func run(_ executable: String, _ arguments: [String], in directory: URL? = nil) throws -> Result {
        try wait(for: start(arguments, in: directory, executable: URL(fileURLWithPath: executable)))
    }

    /// A command that did not exit within its deadline: stopped (Ctrl-C, then killed), with
    /// what it printed by then, so a hang fails its test with the command named instead
    /// of holding the whole run until the suite's own limit.
    public struct Hung: Error, CustomStringConvertible {
        public var arguments: [String]
        public var seconds: Double
        public var output: Result
        public var description: String {
            "\(arguments.joined(separator: " ")) did not exit within \(Int(seconds)) s; it printed:\n\(output.stdout)\n\(output.stderr)"
        }
    }

    /// How long any command a test runs may take: far more than any takes (the slowest,
    /// a sweep or a sharded run, takes under a minute even on a starved machine).
    public static let deadline: Double = 300

    /// Waits for a started process, reading both pipes so neither fills up and blocks it.
    /// Past `deadline` it is interrupted (then killed) and `Hung` is thrown.
    public static func wait(for process: Process, deadline: Double = CommandRunner.deadline) throws -> Result {
        let out = process.standardOutput as! Pipe, err = process.standardError as! Pipe
        let group = DispatchGroup()
        nonisolated(unsafe) var outData = Data(), errData = Data()
        // Threads of their own: a reader blocks as long as the process runs, and on Dispatch's
        // global queue it would hold a thread that URLSession's work in other tests needs.
        group.enter()
        Thread.detachNewThread { outData = out.fileHandleForReading.readDataToEndOfFile(); group.leave() }
        group.enter()
        Thread.detachNewThread { errData = err.fileHandleForReading.readDataToEndOfFile(); group.leave() }
        let started = Date()
        while process.isRunning && Date().timeIntervalSince(started) < deadline { usleep(20_000) }
        let hung = process.isRunning
        if hung {
            process.interrupt()
            let grace = Date()
            while process.isRunning && Date().timeIntervalSince(grace) < 5 { usleep(20_000) }
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        }
        process.waitUntilExit()
        // A stopped command's own children may still hold its pipes open: its output is
        // then what the readers finish with in ten seconds, or none.
        let read = hung ? group.wait(timeout: .now() + 10) == .success : { group.wait(); return true }()
        let result = Result(status: process.terminationStatus, stdout: read ? String(decoding: outData, as: UTF8.self) : "",
                            stderr: read ? String(decoding: errData, as: UTF8.self) : "")
        if hung { throw Hung(arguments: process.arguments ?? [], seconds: deadline, output: result) }
        return result
    }

    /// `fleetlab(_:in:)` for async tests: the waiting happens off Swift's cooperative
    /// threads (two on this machine), which in-process servers of other tests need.
    public static func fleetlabAsync(_ arguments: [String], in directory: URL? = nil, environment: [String: String] = [:]) async throws -> Result {
        try await cpuBound { try wait(for: start(arguments, in: directory, environment: environment)) }
    }

    /// Starts `fleetlab arguments` without waiting; stdout and stderr are pipes.
    public static func start(_ arguments: [String], in directory: URL? = nil, environment: [String: String] = [:],
                             executable: URL = TestPaths.fleetlabExecutable) throws -> Process {
        let process = Process()
        if !environment.isEmpty { process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 } }
        process.executableURL = executable
        process.arguments = arguments
        process.currentDirectoryURL = directory ?? TestPaths.packageRoot
        process.standardOutput = Pipe()
        process.standardError = Pipe()
        process.standardInput = FileHandle.nullDevice
        try process.run()
        return process
    }
}
