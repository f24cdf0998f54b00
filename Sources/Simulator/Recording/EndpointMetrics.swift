/// One endpoint's `http.requests`, `http.latency` and `http.failures`, registered together
/// in that order: what every driver records of a request (the simulator's stacks and the
/// load tester alike), so thresholds and comparisons read them the same way.
public struct EndpointMetrics: Sendable {
    /// Every request made, answered or not.
    public let requests: MetricHandle
    /// From the request to its answer.
    public let latency: MetricHandle
    /// A 5xx, no answer in time, no connection.
    public let failures: MetricHandle

    public init(stack: String, endpoint: String, recorder: inout Recorder) {
        let labels = [("stack", stack), ("endpoint", endpoint)]
        requests = recorder.register("http.requests", labels: labels)
        latency = recorder.register("http.latency", labels: labels)
        failures = recorder.register("http.failures", labels: labels)
    }
}
