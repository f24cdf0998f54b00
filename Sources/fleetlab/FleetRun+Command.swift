import Foundation
import LabStore
import Simulator

extension FleetRun {
    /// Runs `scenario` into `resultsPath` the way every command does: the bar shows its
    /// progress, Ctrl-C stops it with the results so far, and a results file that cannot
    /// be written is bad input, not a crash.
    static func runFromCommand(_ scenario: Scenario, resultsPath: String, bar: ProgressBar) throws -> SimulationOutcome {
        defer { bar.finish() }
        do {
            return try FleetRun(scenario: scenario, resultsPath: resultsPath).run { progress in
                bar.update(progress)
                return !Interrupt.isRequested
            }
        } catch let error as SQLiteError {
            throw CLIFailure.badInput("cannot write \(resultsPath): \(error)")
        }
    }
}
