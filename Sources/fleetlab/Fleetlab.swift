import ArgumentParser
import Foundation

/// The `fleetlab` command. Exit codes: 0 success, 2 bad input (arguments, scenario files,
/// output paths, ports), 3 a threshold or invariant failed, 130 interrupted.
struct Fleetlab: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fleetlab",
        abstract: "A simulation and load-testing lab for mobile client stacks, with reference servers.",
        discussion: """
        Exit status: 0 success, 2 bad input, 3 a threshold or invariant failed, 130 interrupted.

        Documentation: README.md and docs/ in the fleetlab repository.
        """,
        version: FleetlabVersion.string,
        subcommands: [SimulateCommand.self, LoadtestCommand.self, CompareCommand.self, MergeCommand.self, SweepCommand.self, SeedsCommand.self, WorkflowCommand.self, ReportCommand.self, DigestCommand.self, BenchCommand.self, VectorsCommand.self, ServeCommand.self, TokenCommand.self, AIDaemonCommand.self, DeviceCommand.self]
    )
}

enum FleetlabVersion {
    static let string = "0.1.0"
}

/// Exit codes, in one place.
enum ExitStatus {
    static let badInput: Int32 = 2
    static let checksFailed: Int32 = 3
    static let interrupted: Int32 = 130
}

/// A user-facing failure: a message for stderr and the exit status it implies.
struct CLIFailure: Error, CustomStringConvertible {
    var message: String
    var status: Int32

    static func badInput(_ message: String) -> CLIFailure { CLIFailure(message: message, status: ExitStatus.badInput) }

    var description: String { message }
}

@main
enum FleetlabMain {
    static func main() async {
        HugePages.adopt()
        WorkerProcess.dieWithParentIfAsked()
        do {
            var command = try Fleetlab.parseAsRoot()
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch let failure as CLIFailure {
            Console.error("fleetlab: \(failure.message)")
            exit(failure.status)
        } catch {
            let code = Fleetlab.exitCode(for: error)
            let message = Fleetlab.fullMessage(for: error)
            if code == .success {
                if !message.isEmpty { print(message) }
                exit(0)
            }
            if !message.isEmpty { Console.error(message) }
            // ArgumentParser uses 64 for usage errors; fleetlab's contract is 2 for any bad input.
            exit(code == .validationFailure ? ExitStatus.badInput : code.rawValue)
        }
    }
}

/// Writing to the terminal.
enum Console {
    static func error(_ text: String) {
        FileHandle.standardError.write(Data((text.hasSuffix("\n") ? text : text + "\n").utf8))
    }

    static var stderrIsTerminal: Bool { isatty(STDERR_FILENO) == 1 }
}
