public import LabKernel

/// `--chaos N` (`fleetlab simulate`, `fleetlab seeds`): N faults more, drawn from the run's
/// seed, the way TigerBeetle's VOPR and FoundationDB's simulator draw theirs. A search over
/// seeds is then a search over fault schedules too, and a seed that breaks an invariant
/// replays with the same faults.
///
/// Each fault is of a kind the scenario can take (a partition needs sync; a crash or a
/// slowdown, a server the scenario runs; an outage, a server that pushes). It starts after
/// the first 5 % of the run and ends by 90 % of it, so the fleet has time to recover
/// before its invariants are read. It lasts from a minute to a quarter of the run,
/// log-uniform: mostly short, now and then long. A device fault hits 5–100 % of every
/// population, and a server's errors fail 5–100 % of its requests; a slowdown is 2–100
/// times, log-uniform. Draws are rounded to what a scenario file writes (whole seconds,
/// whole percents, tenths of a factor), so the faults printed are exactly the ones run, and
/// pasted at the end of `faults:` they replay the same run.
/// The stream is the seed's `chaos` child, which nothing else draws from: the scenario's
/// own faults, its devices and its servers are as they were.
extension Scenario {
    /// How many chaos faults a run may take.
    public static let chaosCounts: ClosedRange<Int> = 1...20

    /// This scenario with `count` chaos faults after its own, listed in its text.
    public func addingChaos(_ count: Int) -> Scenario {
        var copy = self
        let drawn = chaosFaults(count)
        copy.faults += drawn
        copy.chaos += count
        copy.text += (copy.text.hasSuffix("\n") || copy.text.isEmpty ? "" : "\n")
            + "# fleetlab chaos: \(count) faults from seed \(seed), after the file's own\n"
            + drawn.map { "#   - \($0.yaml)\n" }.joined()
        return copy
    }

    /// The `count` faults `--chaos` draws for this scenario and seed.
    public func chaosFaults(_ count: Int) -> [Fault] {
        var draw = StreamSeed(seed).child("chaos").generator()
        let servers = StackKind.allCases.filter { $0.hasServer && runs($0) }
        let kinds = ChaosKind.allCases.filter { kind in
            switch kind {
            case .massAppKill, .radioOff, .linkSlowdown: return true
            case .partition: return runs(.sync)
            case .serverCrash, .serverSlowdown, .serverErrors: return !servers.isEmpty
            case .pushOutage: return runs(.sync) || runs(.chat)
            }
        }
        let seconds = max(1, duration.nanoseconds / 1_000_000_000)
        let earliest = seconds / 20, latestEnd = seconds * 9 / 10
        let longest = max(1, seconds / 4), shortest = min(60, max(1, seconds / 4))

        func pick<T>(_ options: [T]) -> T { options[Int(draw.next(below: UInt64(options.count)))] }
        func logUniform(_ low: Double, _ high: Double) -> Double {
            DeterministicMath.exp(DeterministicMath.log(low) + draw.nextUnit() * (DeterministicMath.log(high) - DeterministicMath.log(low)))
        }
        /// A window: its start and length in whole seconds, ending by `latestEnd`.
        func window() -> (at: TimeSpan, length: TimeSpan) {
            let length = min(longest, max(1, Int64(logUniform(Double(shortest), Double(longest)).rounded())))
            let lastStart = max(earliest, latestEnd - length)
            return (.seconds(earliest + Int64(draw.next(below: UInt64(lastStart - earliest + 1)))), .seconds(length))
        }
        func fraction() -> Ratio { Ratio(parsing: "\(5 + draw.next(below: 96))%")! }
        func factor() -> Double { (logUniform(2, 100) * 10).rounded() / 10 }

        return (0..<count).map { _ in
            let kind = pick(kinds)
            let (at, length) = window()
            switch kind {
            case .massAppKill: return .massAppKill(at: at, fraction: fraction(), population: nil)
            case .radioOff: return .radioOff(at: at, duration: length, fraction: fraction(), population: nil)
            case .linkSlowdown: return .linkSlowdown(at: at, duration: length, link: pick(AccessKind.allCases), factor: factor())
            case .partition: return .partition(at: at, duration: length, fraction: fraction(), population: nil)
            case .serverCrash: return .serverCrash(at: at, duration: length, server: pick(servers))
            case .serverSlowdown: return .serverSlowdown(at: at, duration: length, server: pick(servers), factor: factor())
            case .serverErrors: return .serverErrors(at: at, duration: length, server: pick(servers), fraction: fraction())
            case .pushOutage: return .pushOutage(at: at, duration: length)
            }
        }
    }
}

/// The kinds `--chaos` draws from, in the order it draws them.
private enum ChaosKind: CaseIterable {
    case massAppKill, radioOff, linkSlowdown, partition, serverCrash, serverSlowdown, pushOutage, serverErrors
}

extension Fault {
    /// The fault as a line of a scenario's `faults:` (YAML flow style).
    public var yaml: String {
        var fields = ["kind: \(kind)", "at: \(at)"]
        if let duration { fields.append("duration: \(duration)") }
        switch self {
        case .massAppKill(_, let fraction, _), .radioOff(_, _, let fraction, _), .partition(_, _, let fraction, _):
            if fraction != .one { fields.append("fraction: \(fraction)") }
        case .serverCrash(_, _, let server): fields.append("server: \(server.rawValue)")
        case .serverSlowdown(_, _, let server, let factor): fields += ["server: \(server.rawValue)", "factor: \(factor)"]
        case .serverErrors(_, _, let server, let fraction): fields += ["server: \(server.rawValue)", "fraction: \(fraction)"]
        case .linkSlowdown(_, _, let link, let factor): fields += ["link: \(link)", "factor: \(factor)"]
        case .pushOutage: break
        }
        if let population { fields.append("devices: \(population)") }
        return "{" + fields.joined(separator: ", ") + "}"
    }
}
