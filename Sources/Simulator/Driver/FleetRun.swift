import Foundation
public import LabKernel
public import LabStore

/// What the progress bar shows.
public struct SimulationProgress: Sendable {
    public var simulated: TimeSpan
    public var duration: TimeSpan
    public var events: UInt64
    public var wallSeconds: Double

    public var fraction: Double { duration.nanoseconds == 0 ? 1 : min(1, simulated.seconds / duration.seconds) }
    public var eventsPerSecond: Double { wallSeconds > 0 ? Double(events) / wallSeconds : 0 }
    /// Wall seconds left at the current pace, or nil before there is a pace.
    public var etaSeconds: Double? {
        guard fraction > 0.001, wallSeconds > 0.2 else { return nil }
        return wallSeconds * (1 - fraction) / fraction
    }
}

/// How a run went, for the summary and the exit code.
public struct SimulationOutcome: Sendable {
    public var events: UInt64
    public var wallSeconds: Double
    public var devices: Int
    public var simulated: TimeSpan
    public var thresholds: [ThresholdResultRow]
    public var invariants: [InvariantResultRow]
    public var interrupted: Bool
    public var resultRows: Int

    public var passed: Bool { thresholds.allSatisfy(\.passed) && invariants.allSatisfy(\.passed) }
}

/// A run that could not go on: what failed under it (not the scenario's fault).
public struct SimulationFailure: Error, CustomStringConvertible, Sendable {
    public let description: String

    init(_ description: String) { self.description = description }
}

/// Drives one scenario through the kernel, with the results written beside it.
///
/// The simulation thread runs the kernel; a `ResultsPipeline` thread writes each closed
/// bucket. Wall-clock facts (start time, wall seconds, peak memory) go to the `run` table
/// only, which the determinism digest leaves out.
public final class FleetRun {
    public private(set) var kernel: Kernel<FleetWorld>
    public let scenario: Scenario
    let pipeline: ResultsPipeline?

    /// Builds the fleet; `resultsPath` nil runs the model without writing results.
    public init(scenario: Scenario, resultsPath: String?) throws {
        self.scenario = scenario
        let pipeline = try resultsPath.map { try ResultsPipeline(path: $0) }
        self.pipeline = pipeline
        var sink: (@Sendable (ResultsBatch) -> Void)?
        if let pipeline { sink = { batch in pipeline.submit(batch) } }
        let world = FleetWorld(scenario: scenario, sink: sink)
        self.kernel = Kernel(world: world, queue: world.initialEvents())
        pipeline?.submit(Self.openingBatch(for: scenario, classes: world.classes))
    }

    /// Runs to the end of the scenario. `progress` is called about every 65,536 events and
    /// may return false to stop early (the results then cover the time simulated so far).
    public func run(progress: ((SimulationProgress) -> Bool)? = nil) throws -> SimulationOutcome {
        let started = WallClock.seconds()
        let startedAt = WallClock.timestamp()
        let end = Instant.zero + scenario.duration
        let reason = kernel.run(until: .time(end)) { snapshot in
            guard let progress else { return true }
            return progress(SimulationProgress(simulated: snapshot.now - .zero, duration: self.scenario.duration,
                                               events: snapshot.eventsProcessed, wallSeconds: WallClock.seconds() - started))
        }
        let interrupted = reason == .stoppedByProgress
        let stoppedAt = interrupted ? kernel.now : end
        let thresholds = kernel.world.finish(at: stoppedAt)
        if let failure = kernel.world.chat?.archiveFailure ?? kernel.world.sync?.archiveFailure { throw SimulationFailure(failure) }
        let wall = WallClock.seconds() - started
        var outcome = SimulationOutcome(
            events: kernel.eventsProcessed, wallSeconds: wall, devices: kernel.world.devices.count,
            simulated: stoppedAt - .zero, thresholds: thresholds, invariants: kernel.world.invariants.rows,
            interrupted: interrupted, resultRows: 0)
        if let pipeline {
            var metadata = ResultsBatch()
            metadata.runMetadata = [
                ("seed", String(scenario.seed)),
                ("scenario_sha256", SHA256Hex.of(scenario.text)),
                ("build", BuildInfo.description),
                ("started_at", startedAt),
                ("wall_seconds", String(wall)),
                ("events", String(kernel.eventsProcessed)),
                ("events_per_second", String(Double(kernel.eventsProcessed) / max(wall, 1e-9))),
                ("peak_rss_bytes", WallClock.peakResidentBytes().map(String.init) ?? "unknown"),
                ("interrupted", interrupted ? "true" : "false"),
                ("simulated_ns", String(stoppedAt.nanoseconds)),
            ]
            if let shard = scenario.shard { metadata.runMetadata.append(("shard", shard.description)) }
            pipeline.submit(metadata)
            try pipeline.finish()
            outcome.resultRows = pipeline.rowsWritten
        }
        return outcome
    }

    static func openingBatch(for scenario: Scenario, classes: [DeviceClass]) -> ResultsBatch {
        var batch = ResultsBatch()
        batch.scenario = ScenarioRow(
            name: scenario.name, text: scenario.text, sha256: SHA256Hex.of(scenario.text), seed: scenario.seed,
            startTimeOfDay: scenario.startAt.nanoseconds, durationNanoseconds: scenario.duration.nanoseconds, bucketNanoseconds: scenario.bucket.nanoseconds,
            devices: classes.reduce(0) { $0 + $1.count }, tickMode: scenario.ticks.mode.rawValue)
        batch.deviceClasses = classes.enumerated().map { index, c in
            DeviceClassRow(id: index, name: c.name, count: c.count, firstDevice: c.firstDevice, parameters: c.parametersJSON)
        }
        return batch
    }
}

/// What build produced a result: the package version and the compiler.
public enum BuildInfo {
    public static let version = "0.1.0"
    public static var description: String {
        #if DEBUG
        let configuration = "debug"
        #else
        let configuration = "release"
        #endif
        return "fleetlab \(version) (\(configuration))"
    }
}
