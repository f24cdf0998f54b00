public import LabKernel

/// How a load test drives its targets, as k6 and Locust name them.
///
/// Closed: `devices` virtual phones each run an iteration, wait a think time, and run the
/// next; the load follows the server (a slow server gets fewer requests), as phones do.
/// Open: iterations arrive at `rate` per second whatever the server does (ramping up
/// linearly over `ramp`), each taken by an idle phone from a pool of `devices`; when none
/// is idle it waits for one, and one that would wait past `maxWait` is dropped and counted
/// (k6's arrival-rate executors drop at once; waiting first shows the overload as latency).
///
/// Either way an iteration's latency is measured from when it was *meant* to start (its
/// arrival, or the end of the previous one plus the think time), so a generator that falls
/// behind shows up in the latency instead of hiding it (no coordinated omission).
public enum WorkloadModel: Sendable, Equatable {
    case closed(devices: Int, thinkTime: TimeSpan)
    /// Closed, paced as the app: each phone's engine ticks at its own interval and syncs
    /// when its sync client says one is due (the server's interval, 30 s on `fleetlab
    /// serve`), so the run shows the sync cadence a real fleet keeps.
    case app(devices: Int)
    case open(rate: Double, ramp: TimeSpan, devices: Int, maxWait: TimeSpan)

    public var devices: Int {
        switch self {
        case .closed(let devices, _), .app(let devices), .open(_, _, let devices, _): return devices
        }
    }
}

/// When the open model's iterations arrive: evenly spaced at the rate in force, which
/// grows linearly from 0 to `rate` over `ramp`. Pure: the `k`-th arrival's offset from the
/// start is a function of `k` alone.
public struct ArrivalSchedule: Sendable {
    public let rate: Double
    public let ramp: TimeSpan

    public init(rate: Double, ramp: TimeSpan) {
        self.rate = rate
        self.ramp = ramp
    }

    /// Arrivals expected by `t` seconds: the integral of the rate.
    public func arrivals(by t: Double) -> Double {
        let r = ramp.seconds
        guard r > 0 else { return rate * t }
        return t < r ? rate * t * t / (2 * r) : rate * r / 2 + rate * (t - r)
    }

    /// Seconds from the start to the `k`-th arrival (k = 1, 2, …): the inverse of `arrivals`.
    public func offset(ofArrival k: Int) -> Double {
        let n = Double(k), r = ramp.seconds
        guard rate > 0 else { return .infinity }
        guard r > 0 else { return n / rate }
        let rampArrivals = rate * r / 2
        return n <= rampArrivals ? (2 * r * n / rate).squareRoot() : r + (n - rampArrivals) / rate
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
