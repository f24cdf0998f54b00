import ArgumentParser
import Foundation
import LabKernel
import Simulator

/// `--json FILE` on every bench: the figures it printed, as data for a CI job to keep or
/// compare. One object: `bench`, `build`, `parameters`, `figures` (docs/benchmarks.md).
struct BenchJSON: ParsableArguments {
    @Option(help: "Write the figures as JSON to this file.")
    var json: String?

    /// Fails before the measurement when the file cannot be written.
    func check() throws {
        if let json { try OutputPaths.checkWritableFile(json) }
    }

    func write(bench: String, parameters: JSONValue, figures: JSONValue) throws {
        guard let json else { return }
        #if DEBUG
        let configuration = "debug"
        #else
        let configuration = "release"
        #endif
        let document: JSONValue = ["bench": .string(bench), "build": .string(BuildInfo.description), "configuration": .string(configuration),
                                   "parameters": parameters, "figures": figures]
        try OutputPaths.write(document.prettyText + "\n", to: json)
    }
}

extension JSONValue {
    /// A figure as a JSON number (integers in doubles stay exact up to 2^53).
    static func figure(_ value: Double) -> JSONValue { .number(value.isFinite ? value : 0) }
}
