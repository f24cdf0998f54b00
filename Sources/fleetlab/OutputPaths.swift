import Foundation

/// Checks output locations before any work is done, so a bad path is a clear message and
/// exit status 2, not a failure after a long run.
enum OutputPaths {
    /// Creates `path` (and parents) if needed and proves a file can be written in it.
    static func prepareDirectory(_ path: String) throws {
        let manager = FileManager.default
        var isDirectory: ObjCBool = false
        if manager.fileExists(atPath: path, isDirectory: &isDirectory) {
            guard isDirectory.boolValue else { throw CLIFailure.badInput("cannot write results to \(path): it is a file, not a directory") }
        } else {
            do {
                try manager.createDirectory(atPath: path, withIntermediateDirectories: true)
            } catch {
                throw CLIFailure.badInput("cannot create the output directory \(path): \(reason(error))")
            }
        }
        let probe = (path as NSString).appendingPathComponent(".fleetlab-write-check-\(getpid())")
        guard manager.createFile(atPath: probe, contents: Data()) else {
            throw CLIFailure.badInput("cannot write to the output directory \(path): permission denied or read-only")
        }
        try? manager.removeItem(atPath: probe)
    }

    /// Proves `file` can be created or replaced (its directory exists and is writable).
    static func checkWritableFile(_ file: String) throws {
        let directory = (file as NSString).deletingLastPathComponent
        let dir = directory.isEmpty ? "." : directory
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: dir, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw CLIFailure.badInput("cannot write \(file): the directory \(dir) does not exist")
        }
        if FileManager.default.fileExists(atPath: file, isDirectory: &isDirectory), isDirectory.boolValue {
            throw CLIFailure.badInput("cannot write \(file): it is a directory")
        }
        guard access(dir, W_OK) == 0 else { throw CLIFailure.badInput("cannot write \(file): \(dir) is not writable") }
    }

    static func reason(_ error: any Error) -> String {
        let nsError = error as NSError
        if let underlying = nsError.userInfo[NSUnderlyingErrorKey] as? NSError, let text = String(validatingCString: strerror(Int32(underlying.code))) {
            return text
        }
        return nsError.localizedDescription
    }

    static func write(_ text: String, to path: String) throws {
        do {
            try text.write(toFile: path, atomically: true, encoding: .utf8)
        } catch {
            throw CLIFailure.badInput("cannot write \(path): \(reason(error))")
        }
    }
}
