public import LabKernel
import LabStore
public import Simulator

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
    /// `shard`: this generator runs the phones numbered `index`, `index + count`, … of
    /// the stages' population (nil: all of them).
    case staged(LoadStages, thinkTime: TimeSpan, shard: FleetShard? = nil)
    /// Closed, paced as the app: each phone's engine ticks at its own interval and syncs
    /// when its sync client says one is due (the server's interval, 30 s on `fleetlab
    /// serve`), so the run shows the sync cadence a real fleet keeps.
    case app(devices: Int)
    case open(ArrivalSchedule, devices: Int, maxWait: TimeSpan)

    public var devices: Int {
        switch self {
        case .closed(let devices, _), .app(let devices), .open(_, let devices, _): return devices
        case .staged(let stages, _, let shard): return Self.phones(below: stages.peak, of: shard)
        }
    }

    /// How many of the phones numbered below `load` are `shard`'s (all without one).
    static func phones(below load: Double, of shard: FleetShard?) -> Int {
        let all = Int(load.rounded(.up))
        guard let shard else { return all }
        return all > shard.index ? (all - shard.index + shard.count - 1) / shard.count : 0
    }

    /// The number, in the whole run, of this generator's phone `index` (its stages' turn).
    public func phoneNumber(_ index: Int) -> Int {
        guard case .staged(_, _, let shard?) = self else { return index }
        return shard.index + index * shard.count
    }

    /// Shard `shard`'s share of the workload, for one of several generators that together
    /// make it (`loadtest --shard I/N`): its slice of the phones (split as evenly as whole
    /// phones allow; with stages, every N-th phone of the stages' population, so the
    /// shards together run exactly the phones the stages call for), and an arrival rate
    /// divided by N. Each shard's phones are a fleet of their own: chat pairs and groups
    /// form among them.
    public func slice(_ shard: FleetShard) -> WorkloadModel {
        let share = { (total: Int) in total * (shard.index + 1) / shard.count - total * shard.index / shard.count }
        switch self {
        case .closed(let devices, let think): return .closed(devices: share(devices), thinkTime: think)
        case .app(let devices): return .app(devices: share(devices))
        case .staged(let stages, let think, _): return .staged(stages, thinkTime: think, shard: shard)
        case .open(let schedule, let devices, let maxWait):
            let rates = schedule.rates, part = 1 / Double(shard.count)
            let scaled = LoadStages(start: rates.start * part, stages: rates.stages.map { .init(duration: $0.duration, target: $0.target * part) })
            return .open(ArrivalSchedule(rates: scaled), devices: share(devices), maxWait: maxWait)
        }
    }

    /// What the workload asks for `seconds` into the run: the phones whose turn it is
    /// (closed models), or the arrivals a second the schedule is at (open).
    public func load(at seconds: Double) -> (phones: Double?, arrivalRate: Double?) {
        switch self {
        case .closed(let devices, _), .app(let devices): return (Double(devices), nil)
        case .staged(let stages, _, let shard): return (Double(Self.phones(below: stages.value(at: seconds), of: shard)), nil)
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
        if rates.stages.isEmpty { return "\(MetricUnit.count.format(rates.start))/s" }
        if rates.stages.count == 1, rates.start == 0 { return "\(MetricUnit.count.format(rates.stages[0].target))/s, ramp \(rates.stages[0].duration)" }
        return "stages " + rates.text(unit: "/s")
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
