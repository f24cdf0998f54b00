public import LabKernel
import LabStore

/// How a load test drives its targets, as k6 and Locust name them.
///
/// Closed: `devices` virtual phones each run an iteration, wait a think time, and run the
/// next; the load follows the server (a slow server gets fewer requests), as phones do.
/// Staged, the closed model with a changing population (k6's ramping VUs): phone `i` runs
/// while the stages call for more than `i` phones; one that is no longer called for ends
/// the iteration it is in and waits for its turn to come again.
/// Open: iterations arrive on a schedule (a rate, ramped up linearly, or in stages) whatever
/// the server does, each taken by an idle phone from a pool of `devices`; when none is idle
/// it waits for one, and one that would wait past `maxWait` is dropped and counted (k6's
/// arrival-rate executors drop at once; waiting first shows the overload as latency).
///
/// Either way an iteration's latency is measured from when it was *meant* to start (its
/// arrival, or the end of the previous one plus the think time), so a generator that falls
/// behind shows up in the latency instead of hiding it (no coordinated omission).
public enum WorkloadModel: Sendable, Equatable {
    case closed(devices: Int, thinkTime: TimeSpan)
    case staged(LoadStages, thinkTime: TimeSpan)
    /// Closed, paced as the app: each phone's engine ticks at its own interval and syncs
    /// when its sync client says one is due (the server's interval, 30 s on `fleetlab
    /// serve`), so the run shows the sync cadence a real fleet keeps.
    case app(devices: Int)
    case open(ArrivalSchedule, devices: Int, maxWait: TimeSpan)

    public var devices: Int {
        switch self {
        case .closed(let devices, _), .app(let devices), .open(_, let devices, _): return devices
        case .staged(let stages, _): return Int(stages.peak.rounded(.up))
        }
    }

    /// What the workload asks for `seconds` into the run: the phones whose turn it is
    /// (closed models), or the arrivals a second the schedule is at (open).
    public func load(at seconds: Double) -> (phones: Double?, arrivalRate: Double?) {
        switch self {
        case .closed(let devices, _), .app(let devices): return (Double(devices), nil)
        case .staged(let stages, _): return (stages.value(at: seconds).rounded(.up), nil)
        case .open(let schedule, _, _): return (nil, schedule.rates.value(at: seconds))
        }
    }
}

/// When the open model's iterations arrive: evenly spaced at the rate in force, a rate
/// that follows its stages (`rate` after a linear `ramp` from 0, or `--stages`). Pure: the
/// `k`-th arrival's offset from the start is a function of `k` alone.
public struct ArrivalSchedule: Sendable, Equatable, CustomStringConvertible {
    public let rates: LoadStages

    public init(rates: LoadStages) { self.rates = rates }

    /// `rate` a second, reached linearly from 0 over `ramp` (at once without one).
    public init(rate: Double, ramp: TimeSpan) {
        rates = ramp > .zero ? LoadStages(stages: [.init(duration: ramp, target: rate)]) : LoadStages(start: rate, stages: [])
    }

    /// Arrivals expected by `t` seconds: the integral of the rate.
    public func arrivals(by t: Double) -> Double { rates.integral(to: t) }

    /// Seconds from the start to the `k`-th arrival (k = 1, 2, …): the inverse of `arrivals`.
    public func offset(ofArrival k: Int) -> Double { rates.time(ofIntegral: Double(k)) }

    public var description: String {
        let n = { (v: Double) in MetricUnit.decimal(v, digits: v == v.rounded() ? 0 : 1) }
        if rates.stages.isEmpty { return "\(n(rates.start))/s" }
        if rates.stages.count == 1, rates.start == 0 { return "\(n(rates.stages[0].target))/s, ramp \(rates.stages[0].duration)" }
        return "stages " + rates.stages.map { "\($0.duration):\(n($0.target))/s" }.joined(separator: ",")
    }
}

/// A think time around its mean, 0.5–1.5× of it from the phone's own seeded stream, so
/// phones started together do not stay in step.
public struct ThinkTime: Sendable {
    public let mean: TimeSpan
    var generator: SeededGenerator

    public init(mean: TimeSpan, seed: StreamSeed) {
        self.mean = mean
        generator = seed.generator()
    }

    public mutating func next() -> TimeSpan {
        TimeSpan(nanoseconds: Int64(Double(mean.nanoseconds) * (0.5 + generator.nextUnit())))
    }
}
