import Foundation
public import LabKernel
public import LabStore
public import Simulator
import Synchronization

/// The simulator's `Recorder` on the wall clock, shared by every iteration in flight:
/// the same metrics, histograms and results rows as a simulated run, so the dashboard,
/// thresholds and `fleetlab compare` read a load test like a simulation. Times are
/// nanoseconds since the run's start.
public final class LoadRecorder: Sendable {
    struct State {
        var recorder = Recorder()
        /// Each endpoint's `http.requests`, `http.latency` and `http.failures`.
        var endpoints: [EndpointKey: EndpointMetrics] = [:]
        /// The metrics a run registers when it first records one (by name and labels):
        /// a stack's, a failure reason's, a workload's.
        var onDemand: [String: MetricHandle] = [:]
        var ok: MetricHandle
        var failed: MetricHandle
        var dropped: MetricHandle
        var lag: MetricHandle
        var cpu: MetricHandle
        var busyGauge: MetricHandle
        var busy = 0
        /// For the progress line: requests and failures so far, and the latencies since it was
        /// last drawn.
        var requests = 0
        var errors = 0
        var recent = LogLinearHistogram(precisionBits: 7)

        /// The metric `name` with `labels`, registered the first time it is asked for.
        mutating func metric(_ name: String, _ labels: [(String, String)] = []) -> MetricHandle {
            let key = name + "{" + MetricDescriptor.canonicalLabels(labels) + "}"
            if let handle = onDemand[key] { return handle }
            let handle = recorder.register(name, labels: labels)
            onDemand[key] = handle
            return handle
        }

        /// One duration into the histogram `name` with `labels` (registered on first use).
        mutating func observe(_ name: String, labels: [(String, String)] = [], _ duration: Duration) {
            recorder.observe(metric(name, labels), UInt64(max(0, duration.nanoseconds)))
        }
    }

    let state: Mutex<State>

    /// A request's stack and endpoint, the labels of its metrics.
    struct EndpointKey: Hashable {
        var stack: String
        var endpoint: String
    }

    public init() {
        var recorder = Recorder()
        let ok = recorder.register("loadtest.iterations", labels: [("outcome", "ok")])
        let failed = recorder.register("loadtest.iterations", labels: [("outcome", "failed")])
        let dropped = recorder.register("loadtest.iterations", labels: [("outcome", "dropped")])
        let lag = recorder.register("loadtest.start_lag")
        let cpu = recorder.register("loadtest.generator_cpu")
        let busy = recorder.register("loadtest.busy_devices")
        state = Mutex(State(recorder: recorder, ok: ok, failed: failed, dropped: dropped, lag: lag, cpu: cpu, busyGauge: busy))
    }

    /// One request of `stack`: its latency (from the iteration's intended start for the
    /// requests that open an iteration), and why it failed (`http.errors{reason}`; nil: it
    /// did not).
    public func request(_ endpoint: String, stack: String = "sync", latency: Duration, failure: String?) {
        let key = EndpointKey(stack: stack, endpoint: endpoint)
        state.withLock { s in
            let handles = s.endpoints[key] ?? {
                let registered = EndpointMetrics(stack: stack, endpoint: endpoint, recorder: &s.recorder)
                s.endpoints[key] = registered
                return registered
            }()
            s.recorder.add(handles.requests)
            let ns = UInt64(max(0, latency.nanoseconds))
            s.recorder.observe(handles.latency, ns)
            s.recent.record(ns)
            s.requests += 1
            if let failure {
                s.recorder.add(handles.failures)
                s.recorder.add(s.metric("http.errors", [("stack", stack), ("endpoint", endpoint), ("reason", failure)]))
                s.errors += 1
            }
        }
    }

    /// A phone heard another's `typing.start` (`chat.typing`, the simulator's count of the
    /// frames the server fanned out).
    public func typingHeard() {
        state.withLock { s in
            s.recorder.add(s.metric("chat.typing"))
        }
    }

    /// The first chunk of an answer, from the iteration's intended start: an agent chat's
    /// (`agent.first_chunk`) or an AI bridge prompt's (`bridge.first_chunk`).
    public func firstChunk(_ latency: Duration, stack: String) {
        state.withLock { s in s.observe("\(stack).first_chunk", latency) }
    }

    /// An AI bridge phone paired with its desktop, or failed to (`bridge.pairings{outcome}`;
    /// `bridge.pairing_time` from the PIN's confirm request when it paired).
    public func bridgePaired(outcome: String, latency: Duration) {
        state.withLock { s in
            s.recorder.add(s.metric("bridge.pairings", [("outcome", outcome)]))
            if outcome == "ok" { s.observe("bridge.pairing_time", latency) }
        }
    }

    /// An AI bridge prompt ended (`bridge.requests{outcome}`, `bridge.latency{outcome}` from
    /// the iteration's intended start).
    public func bridgeAnswered(outcome: String, latency: Duration) {
        state.withLock { s in
            s.recorder.add(s.metric("bridge.requests", [("outcome", outcome)]))
            s.observe("bridge.latency", labels: [("outcome", outcome)], latency)
        }
    }

    /// A chat message reached one of its readers' phones, `latency` after the iteration that
    /// sent it was meant to start (`chat.delivery_latency{kind=dm|group}`, the simulator's
    /// metric, one observation per reader as there).
    public func chatDelivered(_ latency: Duration, kind: String) {
        state.withLock { s in s.observe("chat.delivery_latency", labels: [("kind", kind)], latency) }
    }

    /// A killed app was launched again and is back at work, `latency` after the launch
    /// (`loadtest.<stack>_relaunch`, a load test's own): chat's socket open and its channels
    /// caught up; sync's engine restored and its first sync answered.
    public func relaunched(_ latency: Duration, stack: String) {
        state.withLock { s in s.observe("loadtest.\(stack)_relaunch", latency) }
    }

    /// Time between a phone's consecutive syncs, by the power state its engine ran in.
    public func syncInterval(_ interval: Duration, powerState: PowerState) {
        state.withLock { s in s.observe("sync.interval", labels: [("power_state", powerState.description)], interval) }
    }

    /// An iteration began, `lag` after its intended start (nil: not the generator's lag).
    public func iterationStarted(lag: Duration?) {
        state.withLock { s in
            s.busy += 1
            if let lag { s.recorder.observe(s.lag, UInt64(max(0, lag.nanoseconds))) }
        }
    }

    public func iterationEnded(ok: Bool) {
        state.withLock { s in
            s.busy -= 1
            s.recorder.add(ok ? s.ok : s.failed)
        }
    }

    public func dropped() {
        state.withLock { s in s.recorder.add(s.dropped) }
    }

    /// Closes the bucket that started at `start` (ns since the run's start) with the
    /// generator's CPU share over it and what the workload asked for at its end
    /// (`loadtest.phones` or `loadtest.arrival_rate`); returns its rows.
    public func closeBucket(startingAt start: Int64, cpuPercent: Double, load: (phones: Double?, arrivalRate: Double?) = (nil, nil)) -> ResultsBatch {
        state.withLock { s in
            s.recorder.set(s.cpu, cpuPercent)
            if let phones = load.phones { s.recorder.set(s.metric("loadtest.phones"), phones) }
            if let rate = load.arrivalRate { s.recorder.set(s.metric("loadtest.arrival_rate"), rate) }
            s.recorder.set(s.busyGauge, Double(s.busy))
            s.recorder.closeBucket(startingAt: start)
            return s.recorder.takeBatch()
        }
    }

    /// Requests and failures so far, and the p99 of the requests since the last call (nil:
    /// none), for the progress line. Its own window, not the results bucket's: a bucket
    /// that closes just before the line is drawn would leave it nothing to show.
    public func takeProgress() -> (requests: Int, errors: Int, p99: UInt64?) {
        state.withLock { s in
            defer { s.recent = LogLinearHistogram(precisionBits: 7) }
            return (s.requests, s.errors, s.recent.isEmpty ? nil : s.recent.value(atPercentile: 99))
        }
    }

    /// The first of `thresholds` (each with `abortOnFail`) that the data so far passes, after
    /// its `delayAbortEval` of the run (`elapsed`); nil while none is (no data is no reason).
    public func crossed(_ thresholds: [Threshold], elapsed: TimeSpan) -> ThresholdResultRow? {
        let due = thresholds.filter { $0.abortOnFail && elapsed >= $0.delayAbortEval }
        guard !due.isEmpty else { return nil }
        return state.withLock { s in ThresholdEvaluator.evaluate(due, recorder: s.recorder).first { !$0.passed && $0.observed != nil } }
    }

    /// The last rows and the thresholds, evaluated on everything recorded.
    public func finish(thresholds: [Threshold]) -> ResultsBatch {
        state.withLock { s in
            s.recorder.closeRun()
            let results = ThresholdEvaluator.evaluate(thresholds, recorder: s.recorder)
            var batch = s.recorder.takeBatch()
            batch.thresholds = results
            return batch
        }
    }
}

extension Duration {
    var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}
