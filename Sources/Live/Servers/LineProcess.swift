import Foundation

/// A local program spoken to one line at a time (an ACP agent over stdio): lines written
/// to its stdin as they come, each line of its stdout reported, its end reported once.
/// Its stderr is discarded (agents log prompts there). `stop` kills it with SIGKILL (see
/// `CommandBackend` for why not SIGTERM), and with it every process it started.
final class LineProcess: @unchecked Sendable {
    enum Event: Sendable {
        case line(String)
        case exited(status: Int32)
    }

    /// A line longer than this ends the program: nothing a phone should see is that long.
    static let maxLine = 1 << 20

    /// Writing to a program that already exited raises SIGPIPE, whose default kills the
    /// whole server: a server that runs programs ignores it (the write just fails).
    static let brokenPipesIgnored: Bool = {
        signal(SIGPIPE, SIG_IGN)
        return true
    }()

    private let process = Process()
    private let stdin = Pipe()
    private let lock = NSLock()
    private var buffer: [UInt8] = []
    private var ended = false

    /// Starts `argv` in `directory`; `report` hears its lines and its end (also when it
    /// cannot start: status -1).
    init(argv: [String], directory: String, report: @escaping @Sendable (Event) -> Void) {
        Self.prepare(process, argv: argv)
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        let output = Pipe()
        process.standardInput = stdin
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        let reader = ProgramOutput(output) { [self] data in
            for line in take(data) { report(.line(line)) }
        }
        process.terminationHandler = { [self] process in
            Self.killGroup(process)
            reader.waitForEnd()
            if finish() { report(.exited(status: process.terminationStatus)) }
        }
        do {
            try process.run()
        } catch {
            ProgramOutput.abandon(output)
            if finish() { report(.exited(status: -1)) }
        }
    }

    /// Points `process` at `argv`: a path runs as given, a bare name is looked up on PATH
    /// (through `env`); SIGPIPE is ignored from now on.
    static func prepare(_ process: Process, argv: [String]) {
        _ = brokenPipesIgnored
        let executable = argv.first ?? ""
        if executable.contains("/") {
            process.executableURL = URL(fileURLWithPath: executable)
            process.arguments = Array(argv.dropFirst())
        } else {
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = argv
        }
    }

    /// Kills a program and what it started. Foundation starts each program as the leader
    /// of its own process group; a child left behind (`sh -c 'sleep 30'`) would hold the
    /// output pipe open, and the read of the last output would wait for it.
    static func killGroup(_ process: Process) {
        let pid = process.processIdentifier
        guard pid > 0 else { return }
        kill(-pid, SIGKILL)
    }

    /// Splits what was read into whole lines; a line over `maxLine` kills the program.
    private func take(_ data: Data) -> [String] {
        lock.withLock {
            buffer.append(contentsOf: data)
            var lines: [String] = []
            while let end = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                lines.append(String(decoding: buffer[..<end], as: UTF8.self))
                buffer.removeSubrange(...end)
            }
            if buffer.count > Self.maxLine {
                buffer = []
                if process.isRunning { Self.killGroup(process) }
            }
            return lines
        }
    }

    private func finish() -> Bool {
        lock.withLock {
            defer { ended = true }
            return !ended
        }
    }

    func write(_ line: String) {
        guard process.isRunning else { return }
        try? stdin.fileHandleForWriting.write(contentsOf: Data((line + "\n").utf8))
    }

    func stop() {
        guard process.isRunning else { return }
        Self.killGroup(process)
    }
}
