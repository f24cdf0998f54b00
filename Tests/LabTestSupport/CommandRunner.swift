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

    /// Waits for a started process, reading both pipes so neither fills up and blocks it.
    public static func wait(for process: Process) throws -> Result {
        let out = process.standardOutput as! Pipe, err = process.standardError as! Pipe
        let group = DispatchGroup()
        nonisolated(unsafe) var outData = Data(), errData = Data()
        // Threads of their own: a reader blocks as long as the process runs, and on Dispatch's
        // global queue it would hold a thread that URLSession's work in other tests needs.
        group.enter()
        Thread.detachNewThread { outData = out.fileHandleForReading.readDataToEndOfFile(); group.leave() }
        group.enter()
        Thread.detachNewThread { errData = err.fileHandleForReading.readDataToEndOfFile(); group.leave() }
        process.waitUntilExit()
        group.wait()
        return Result(status: process.terminationStatus, stdout: String(decoding: outData, as: UTF8.self),
                      stderr: String(decoding: errData, as: UTF8.self))
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
