import ArgumentParser
import LabKernel

/// `--duration 6h` on the command line.
struct DurationArgument: ExpressibleByArgument {
    var span: TimeSpan

    init(span: TimeSpan) { self.span = span }

    init?(argument: String) {
        guard let span = TimeSpan(argument), span > .zero else { return nil }
        self.span = span
    }
}
