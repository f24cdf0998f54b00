public import LabKernel
import LabStore

/// A load that changes over the run in stages, as k6's `stages`: phones (the closed model)
/// or arrivals a second (the open model), moving linearly from where the previous stage
/// ended to each stage's target over its duration, from `start` at the run's start; after
/// the last stage the load holds. `30s:100,2m:100,30s:0` ramps to 100 phones over 30 s,
/// holds them two minutes and ramps down to none.
///
/// Pure: every question (the load at a moment, the arrivals by a moment, when a phone's
/// turn comes) is answered in closed form from the stages, so a run's schedule depends on
/// its arguments alone.
public struct LoadStages: Sendable, Equatable, CustomStringConvertible {
    public struct Stage: Sendable, Equatable {
        public var duration: TimeSpan
        public var target: Double

        public init(duration: TimeSpan, target: Double) {
            self.duration = duration
            self.target = target
        }
    }

    public let start: Double
    public let stages: [Stage]

    public init(start: Double = 0, stages: [Stage]) {
        self.start = start
        self.stages = stages
    }

    /// The stages' total duration: a staged run's length.
    public var total: TimeSpan { stages.reduce(.zero) { $0 + $1.duration } }

    /// The highest load any stage reaches (a closed model's phones).
    public var peak: Double { stages.reduce(start) { max($0, $1.target) } }

    /// Each stage as a segment of seconds from the start: from (t0, v0) to (t1, v1).
    var segments: [(t0: Double, v0: Double, t1: Double, v1: Double)] {
        var out: [(Double, Double, Double, Double)] = []
        var t = 0.0, v = start
        for stage in stages {
            let end = t + stage.duration.seconds
            out.append((t, v, end, stage.target))
            (t, v) = (end, stage.target)
        }
        return out
    }

    /// What the last stage ended at (or `start`): the load after the stages.
    var final: Double { stages.last?.target ?? start }

    /// The load `t` seconds from the start.
    public func value(at t: Double) -> Double {
        for s in segments where t < s.t1 {
            guard t > s.t0 else { return s.v0 }
            return s.v0 + (s.v1 - s.v0) * (t - s.t0) / (s.t1 - s.t0)
        }
        return final
    }

    /// The load integrated from the start to `t` seconds (arrivals by then, for a rate).
    public func integral(to t: Double) -> Double {
        var total = 0.0
        for s in segments {
            guard t > s.t0 else { return total }
            let end = min(t, s.t1)
            total += (s.v0 + value(at: end)) / 2 * (end - s.t0)
            guard t > s.t1 else { return total }
        }
        let last = segments.last?.t1 ?? 0
        return total + final * max(0, t - last)
    }

    /// The seconds from the start by which the integral reaches `n` (the `n`-th arrival of
    /// a rate); infinity when it never does.
    public func time(ofIntegral n: Double) -> Double {
        var before = 0.0
        for s in segments {
            let area = (s.v0 + s.v1) / 2 * (s.t1 - s.t0)
            if before + area >= n && s.t1 > s.t0 {
                // Solve v0·x + (v1 − v0)/(2d)·x² = n − before for x in [0, d].
                let d = s.t1 - s.t0, slope = (s.v1 - s.v0) / d, need = n - before
                guard need > 0 else { return s.t0 }
                if slope == 0 { return s.t0 + need / s.v0 }
                let x = (-s.v0 + (s.v0 * s.v0 + 2 * slope * need).squareRoot()) / slope
                return s.t0 + min(d, max(0, x))
            }
            before += area
        }
        guard final > 0 else { return .infinity }
        return (segments.last?.t1 ?? 0) + (n - before) / final
    }

    /// The first moment at or after `t` seconds when the load is above `level` (phone
    /// number `level` runs while more than `level` phones are called for); nil: never again.
    public func firstAbove(_ level: Double, atOrAfter t: Double) -> Double? {
        if value(at: t) > level { return t }
        // The load is at most `level` at t, so it must rise past it in a later stage (a
        // stage that starts above it starts after t, where it fell below before).
        for s in segments where s.t1 > t && s.v1 > level {
            let crossing = s.v0 > level ? s.t0 : s.t0 + (level - s.v0) / (s.v1 - s.v0) * (s.t1 - s.t0)
            return max(t, crossing)
        }
        return nil
    }

    /// `30s:100,2m:100,30s:0` (phones) or `30s:200/s,1m:200/s` (arrivals a second): each
    /// stage a duration and the target reached at its end. Nil when malformed; `isRate`
    /// says whether the targets were rates (all of them, or none).
    public static func parse(_ text: String) -> (stages: LoadStages, isRate: Bool)? {
        var stages: [Stage] = [], rates: Set<Bool> = []
        for part in text.split(separator: ",", omittingEmptySubsequences: false) {
            let pieces = part.split(separator: ":", omittingEmptySubsequences: false).map { String($0).trimmingWhitespace() }
            guard pieces.count == 2, let duration = TimeSpan(pieces[0]), duration >= .zero else { return nil }
            let isRate = pieces[1].hasSuffix("/s")
            guard let target = Double(isRate ? String(pieces[1].dropLast(2)) : pieces[1]), target.isFinite, target >= 0 else { return nil }
            rates.insert(isRate)
            stages.append(Stage(duration: duration, target: target))
        }
        guard !stages.isEmpty, rates.count == 1 else { return nil }
        return (LoadStages(stages: stages), rates.contains(true))
    }

    public var description: String { text(unit: "") }

    /// The stages as `--stages` takes them, each target followed by `unit` (`/s` for rates).
    func text(unit: String) -> String {
        stages.map { "\($0.duration):\(MetricUnit.count.format($0.target))\(unit)" }.joined(separator: ",")
    }
}
