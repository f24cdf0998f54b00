public import LabKernel
public import LabStore

/// The summaries `--json` writes, for scripts: what the terminal summary says, as data.
/// Durations are nanoseconds (`_ns`), energies joules; every key is documented in docs/ci.md.
public enum SummaryJSON {
    public static func run(_ results: RunResults, digest: String, passed: Bool, interrupted: Bool) -> JSONValue {
        let s = results.scenario
        let endpoints: [JSONValue] = RunFigures.endpoints(results).map { e in
            ["stack": .string(e.stack), "endpoint": .string(e.endpoint), "requests": .number(Double(e.requests)),
             "failures": .number(e.failures), "p50_ns": .number(e.p50), "p90_ns": .number(e.p90), "p99_ns": .number(e.p99)]
        }
        let energy: [JSONValue] = RunFigures.energy(results).map { e in
            ["stack": .string(e.stack), "joules_per_device_hour": .number(e.joulesPerDeviceHour), "battery_percent_per_day": .number(e.batteryPercentPerDay)]
        }
        let perDevice: [JSONValue] = RunFigures.deviceEnergy(results).map { e in
            ["stack": .string(e.stack), "population": e.population.map(JSONValue.string) ?? .null, "devices": .number(Double(e.devices)),
             "p50_percent_per_day": .number(e.p50),
             "p90_percent_per_day": .number(e.p90), "p99_percent_per_day": .number(e.p99), "max_percent_per_day": .number(e.max)]
        }
        var cadence: [JSONValue] = []
        if let cost = RunFigures.syncCost(results) {
            cadence = cost.cadence.map { ["power_state": .string($0.powerState), "p50_ns": .number($0.p50)] }
        }
        return [
            "scenario": .string(s.name), "scenario_sha256": .string(s.sha256), "seed": .number(Double(s.seed)),
            "devices": .number(Double(s.devices)), "duration_ns": .number(Double(s.durationNanoseconds)),
            "build": .string(results.runMetadata["build"] ?? ""), "digest": .string(digest),
            "passed": .bool(passed), "interrupted": .bool(interrupted),
            "events": .number(Double(results.runMetadata["events"].flatMap(Double.init) ?? 0)),
            "wall_seconds": .number(results.runMetadata["wall_seconds"].flatMap(Double.init) ?? 0),
            "latency": .array(endpoints), "energy": .array(energy), "energy_per_device": .array(perDevice), "sync_cadence": .array(cadence),
            "thresholds": .array(results.thresholds.map { t in
                ["metric": .string(t.metric), "statistic": .string(t.statistic), "op": .string(t.op), "bound": .number(t.bound),
                 "observed": t.observed.map(JSONValue.number) ?? .null, "passed": .bool(t.passed), "message": .string(t.message)]
            }),
            "invariants": .array(results.invariants.map { i in
                ["name": .string(i.name), "checks": .number(Double(i.checks)), "violations": .number(Double(i.violations)),
                 "first_violation": i.firstViolation.map(JSONValue.string) ?? .null]
            }),
        ]
    }

    public static func comparison(_ c: RunComparison) -> JSONValue {
        func side(_ s: RunComparison.Side) -> JSONValue {
            ["path": .string(s.path), "scenario": .string(s.scenario), "scenario_sha256": .string(s.scenarioSHA256),
             "seed": .number(Double(s.seed)), "devices": .number(Double(s.devices)), "duration_ns": .number(Double(s.durationNanoseconds)),
             "build": .string(s.build), "digest": .string(s.digest)]
        }
        func figure(_ f: ComparedFigure) -> JSONValue {
            let change = f.change
            return ["metric": .string(f.metric), "labels": .string(f.labels), "statistic": .string(f.statistic), "unit": .string(f.unit.rawValue),
                    "baseline": f.baseline.map(JSONValue.number) ?? .null, "candidate": f.candidate.map(JSONValue.number) ?? .null,
                    // JSON has no infinity: a move from 0 is reported as null change with `from_zero`.
                    "change": change.flatMap { $0.isFinite ? JSONValue.number($0) : nil } ?? .null,
                    "from_zero": .bool(change?.isInfinite ?? false),
                    "better": .string(f.better.rawValue), "judged": .bool(f.judged), "regression": .number(f.regression.isFinite ? f.regression : 1e308)]
        }
        let verdict = c.identical ? "identical" : (c.passed ? "passed" : "failed")
        return [
            "verdict": .string(verdict), "identical": .bool(c.identical),
            "baseline": side(c.baseline), "candidate": side(c.candidate),
            "max_regression": c.policy.maxRegression.map(JSONValue.number) ?? .null,
            "limits": .array(c.policy.limits.map { .string($0.text) }),
            "breaches": .array(c.breaches.map { ["kind": .string($0.kind.rawValue), "name": .string($0.name), "message": .string($0.message)] }),
            "figures": .array(c.figures.map(figure)),
        ]
    }
}
