import ArgumentParser
import LabKernel
import LoadTest
import Simulator

/// `--duration 6h` on the command line.
struct DurationArgument: ExpressibleByArgument {
    var span: TimeSpan

    init(span: TimeSpan) { self.span = span }

    init?(argument: String) {
        guard let span = TimeSpan(argument), span > .zero else { return nil }
        self.span = span
    }
}

/// `--connections phone|shared` of `loadtest`.
struct ConnectionsArgument: ExpressibleByArgument {
    var model: ConnectionModel

    init(model: ConnectionModel) { self.model = model }

    init?(argument: String) {
        guard let model = ConnectionModel(rawValue: argument) else { return nil }
        self.model = model
    }

    static var allValueStrings: [String] { ConnectionModel.allCases.map(\.rawValue) }
}

/// `--chaos N` of `simulate` and `seeds`: its bounds, and how a reproduce line passes it on.
enum ChaosOption {
    static func validate(_ count: Int?) throws {
        if let count, !Scenario.chaosCounts.contains(count) {
            throw ValidationError("--chaos must be \(Scenario.chaosCounts.lowerBound)...\(Scenario.chaosCounts.upperBound) faults")
        }
    }

    /// ` --chaos N`, or nothing for a run without chaos.
    static func argument(_ count: Int?) -> String { (count ?? 0) > 0 ? " --chaos \(count!)" : "" }
}
