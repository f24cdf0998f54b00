import Foundation

/// A local program's standard output, read on a thread of its own until its end (every
/// writer gone), each read handed to `take`. The program's end is reported only after
/// `waitForEnd`: a termination handler that read the pipe itself could race the reads
/// still in flight and report the end before the last output (a `pwd` answered empty).
final class ProgramOutput: Sendable {
    private let done = DispatchGroup()

    /// Starts reading `pipe`; call before the program runs (a program that cannot start
    /// is `abandon`ed).
    init(_ pipe: Pipe, take: @escaping @Sendable (Data) -> Void) {
        done.enter()
        Thread.detachNewThread { [done] in
            let handle = pipe.fileHandleForReading
            while true {
                let data = handle.availableData
                if data.isEmpty { break }
                take(data)
            }
            done.leave()
        }
    }

    /// Waits until everything the program wrote has been taken. A child that left the
    /// program's process group and kept the pipe open is waited for `timeout` seconds.
    func waitForEnd(timeout: Double = 2) {
        _ = done.wait(timeout: .now() + timeout)
    }

    /// The program never ran: the write end this process still holds is closed, so the
    /// reader sees the end.
    static func abandon(_ pipe: Pipe) {
        try? pipe.fileHandleForWriting.close()
    }
}
