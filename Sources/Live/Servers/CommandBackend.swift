import Foundation
import LabKernel

/// Runs a local program for a server that answers with one (the agent runtime's command
/// backend, the AI bridge daemon's command provider): the input on its stdin, its stdout
/// streamed back as it comes, stopped at `timeout` (or by `stop`) and capped at
/// `outputLimit` bytes. Its stderr is discarded (it may echo the prompt, and logs never
/// hold prompts).
final class CommandBackend: @unchecked Sendable {
    enum Event: Sendable {
        case output(String)
        case finished(status: Int32, reason: String?)
    }

    static let outputLimit = 1 << 20

    /// A program that runs: `stop` kills it (its end is still reported).
    struct Running: Sendable {
        let process: Process?
        func stop() {
            guard let process, process.isRunning else { return }
            LineProcess.killGroup(process)
        }
    }

    @discardableResult
    func run(argv: [String], input: String, timeout: TimeSpan, directory: String? = nil, report: @escaping @Sendable (Event) -> Void) -> Running {
        let process = Process()
        if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
        LineProcess.prepare(process, argv: argv)
        let executable = argv[0]
        let stdin = Pipe(), output = Pipe()
        process.standardInput = stdin
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        let state = RunState()
        let reader = ProgramOutput(output) { data in
            if let text = state.take(data, limit: Self.outputLimit) { report(.output(text)) }
        }
        process.terminationHandler = { process in
            // What the program left running dies with it (its run is over).
            LineProcess.killGroup(process)
            reader.waitForEnd()
            if let tail = state.flush() { report(.output(tail)) }
            let reason = state.timedOut ? "timed out after \(timeout)" : state.truncated ? "output over \(Self.outputLimit) bytes" : nil
            report(.finished(status: state.timedOut ? -2 : process.terminationStatus, reason: reason))
        }
        do {
            try process.run()
        } catch {
            ProgramOutput.abandon(output)
            report(.finished(status: -1, reason: "cannot run \(executable)"))
            return Running(process: nil)
        }
        stdin.fileHandleForWriting.write(Data(input.utf8))
        try? stdin.fileHandleForWriting.close()
        let deadline = DispatchTime.now() + .nanoseconds(Int(min(timeout.nanoseconds, Int64(Int.max))))
        DispatchQueue.global().asyncAfter(deadline: deadline) {
            guard process.isRunning else { return }
            state.markTimedOut()
            // SIGKILL: a child inherits the signal mask of a server that blocks SIGTERM for
            // its own graceful shutdown, so a SIGTERM could wait forever.
            LineProcess.killGroup(process)
        }
        return Running(process: process)
    }

    /// What a run has read: bytes not yet a whole UTF-8 sequence wait for the next read.
    final class RunState: @unchecked Sendable {
        private let lock = NSLock()
        private var carry: [UInt8] = []
        private var total = 0
        private(set) var timedOut = false
        private(set) var truncated = false

        func markTimedOut() { lock.withLock { timedOut = true } }

        func take(_ data: Data, limit: Int) -> String? {
            lock.withLock {
                let room = max(0, limit - total)
                if data.count > room { truncated = true }
                let accepted = [UInt8](data.prefix(room))
                total += accepted.count
                var bytes = carry + accepted
                carry = []
                // Hold back a UTF-8 sequence cut at the end of this read.
                var lead = bytes.count - 1, continuation = 0
                while lead >= 0, continuation < 3, bytes[lead] & 0xC0 == 0x80 {
                    lead -= 1
                    continuation += 1
                }
                if lead >= 0 {
                    let first = bytes[lead]
                    let length = first >= 0xF0 ? 4 : first >= 0xE0 ? 3 : first >= 0xC0 ? 2 : 1
                    if length > continuation + 1 {
                        carry = Array(bytes[lead...])
                        bytes.removeSubrange(lead...)
                    }
                }
                return bytes.isEmpty ? nil : String(decoding: bytes, as: UTF8.self)
            }
        }

        func flush() -> String? {
            lock.withLock {
                defer { carry = [] }
                return carry.isEmpty ? nil : String(decoding: carry, as: UTF8.self)
            }
        }
    }
}
