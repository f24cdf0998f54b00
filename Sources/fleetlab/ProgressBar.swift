import Foundation
import LabKernel
import LabStore
import Simulator

/// The progress line on stderr: simulated time, events/s and ETA.
///
/// On a terminal it redraws one line about ten times a second; in a log (CI) it prints a
/// plain line every ten seconds instead, so logs stay readable.
final class ProgressBar {
    let enabled: Bool
    /// What the run is, before the bar (a sweep's point).
    let label: String
    let terminal = Console.stderrIsTerminal
    var lastDraw = 0.0
    var drewSomething = false

    init(enabled: Bool, label: String = "") {
        self.enabled = enabled
        self.label = label
    }

    func update(_ p: SimulationProgress) {
        guard enabled else { return }
        let now = WallClock.seconds()
        guard now - lastDraw >= (terminal ? 0.1 : 10) else { return }
        lastDraw = now
        let width = 28
        let filled = Int((p.fraction * Double(width)).rounded(.down))
        let bar = String(repeating: "█", count: filled) + String(repeating: "░", count: width - filled)
        let eta = p.etaSeconds.map { "ETA " + Self.clock($0) } ?? "ETA --"
        let line = (label.isEmpty ? "" : label + "  ") + "\(bar) \(Self.pad(Self.percent(p.fraction), 4)) sim \(Self.clock(p.simulated.seconds))/\(Self.clock(p.duration.seconds))"
            + "  \(Self.rate(p.eventsPerSecond)) ev/s  \(eta)"
        if terminal {
            Console.errorRaw("\r\u{1B}[2K" + line)
        } else {
            Console.error(line)
        }
        drewSomething = true
    }

    func finish() {
        if enabled && terminal && drewSomething { Console.errorRaw("\r\u{1B}[2K") }
    }

    static func clock(_ seconds: Double) -> String {
        let s = Int(seconds.rounded())
        let h = s / 3600, m = (s % 3600) / 60, sec = s % 60
        let two = { (v: Int) in v < 10 ? "0\(v)" : "\(v)" }
        return h > 0 ? "\(h):\(two(m)):\(two(sec))" : "\(m):\(two(sec))"
    }

    static func percent(_ f: Double) -> String { "\(Int((f * 100).rounded(.down)))%" }

    static func rate(_ r: Double) -> String {
        if r >= 1e6 { return MetricUnit.decimal(r / 1e6, digits: 1) + "M" }
        if r >= 1e3 { return MetricUnit.decimal(r / 1e3, digits: 1) + "k" }
        return MetricUnit.decimal(r, digits: 0)
    }

    static func pad(_ s: String, _ n: Int) -> String { String(repeating: " ", count: max(0, n - s.count)) + s }
}

extension Console {
    static func errorRaw(_ text: String) {
        FileHandle.standardError.write(Data(text.utf8))
    }
}
