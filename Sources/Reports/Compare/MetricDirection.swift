public import LabStore

/// Which way is better for a figure. Latency, failures, energy and bytes are better lower;
/// battery and work finished are better higher; the rest (request counts, sync cadence,
/// session length, utilisation) describe the run rather than score it, so a comparison
/// shows them and only judges them when a limit names them. The lists are by name, so a
/// new metric is neutral until it is placed here (docs/ci.md).
public enum MetricDirection {
    public enum Better: String, Sendable, Equatable {
        case lower, higher, neither
    }

    /// Durations that are a choice or a person's pace, not the system's speed.
    static let neutralDurations: Set<String> = ["sync.interval", "session.length", "workflow.input_wait"]

    /// Counters whose growth is a failure or a cost.
    static let lowerCounters: Set<String> = [
        "http.failures", "chat.decryption_failures", "chat.sessions_lost", "chat.reconnects", "workflow.lost_handlers",
        "workflow.rejected", "workflow.retries", "workflow.recoveries", "energy.joules", "network.bytes", "radio.seconds",
    ]

    /// Counters of work done for users.
    static let higherCounters: Set<String> = ["chat.decrypted", "sync.approvals_resolved"]

    /// Outcomes (the `outcome` label) that are work done; any other outcome is a failure.
    static let goodOutcomes: Set<String> = ["completed", "applied"]

    public static func better(metric: String, labels: String, statistic: String, unit: MetricUnit) -> Better {
        if statistic == "count" { return .neither }
        if metric == "workflow.finished" || metric == "sync.commands" {
            let outcome = MetricDescriptor.label("outcome", in: labels) ?? ""
            if goodOutcomes.contains(outcome) { return .higher }
            return outcome == "duplicate" || outcome == "deferred" ? .neither : .lower
        }
        if metric.hasPrefix("battery.") { return .higher }
        if metric == "ticks.per_device_hour" || metric == "energy.device_day" { return .lower }
        if unit == .nanoseconds { return neutralDurations.contains(metric) ? .neither : .lower }
        if lowerCounters.contains(metric) { return .lower }
        if higherCounters.contains(metric) { return .higher }
        return .neither
    }
}
