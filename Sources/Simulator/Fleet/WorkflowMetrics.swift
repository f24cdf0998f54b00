import DeviceWorkflows
import Orch8Wire
import LabKernel

/// Metric handles of the workflow layer, by sequence (in workload order) and outcome.
struct WorkflowMetrics {
    static let outcomes = ["completed", "failed", "cancelled"]
    static let rejections = ["resource_limit", "device_off", "queue_full"]
    static let answerOutcomes = ["answered", "never", "lost"]

    /// Sequence name → index into the per-sequence arrays.
    let sequenceIndex: [String: Int]
    let started: [MetricHandle]
    let finished: [[MetricHandle]]
    let steps: [MetricHandle]
    let retries: [MetricHandle]
    /// Per sequence, by step id.
    let stepLatency: [[String: MetricHandle]]
    let inputWait: [MetricHandle]
    let duration: [[MetricHandle]]
    let rejected: [MetricHandle]
    let answers: [MetricHandle]
    let active: MetricHandle
    let recoveries: MetricHandle
    let lostHandlers: MetricHandle
    /// By power state.
    let executedTicks: [MetricHandle]

    /// `sequences` pairs each workload's sequence name with the ids of its steps.
    init(sequences: [(name: String, steps: [String])], recorder: inout Recorder) {
        var index: [String: Int] = [:]
        var names: [String] = []
        var stepsOf: [[String]] = []
        for (name, steps) in sequences where index[name] == nil {
            index[name] = names.count
            names.append(name)
            stepsOf.append(steps)
        }
        sequenceIndex = index
        started = names.map { recorder.register("workflow.started", labels: [("sequence", $0)]) }
        finished = names.map { name in Self.outcomes.map { recorder.register("workflow.finished", labels: [("sequence", name), ("outcome", $0)]) } }
        steps = names.map { recorder.register("workflow.steps", labels: [("sequence", $0)]) }
        retries = names.map { recorder.register("workflow.retries", labels: [("sequence", $0)]) }
        stepLatency = zip(names, stepsOf).map { name, steps in
            Dictionary(steps.map { ($0, recorder.register("workflow.step_latency", labels: [("sequence", name), ("step", $0)])) },
                       uniquingKeysWith: { first, _ in first })
        }
        inputWait = names.map { recorder.register("workflow.input_wait", labels: [("sequence", $0)]) }
        duration = names.map { name in Self.outcomes.map { recorder.register("workflow.duration", labels: [("sequence", name), ("outcome", $0)]) } }
        rejected = Self.rejections.map { recorder.register("workflow.rejected", labels: [("reason", $0)]) }
        answers = Self.answerOutcomes.map { recorder.register("workflow.answers", labels: [("outcome", $0)]) }
        active = recorder.register("workflow.active")
        recoveries = recorder.register("workflow.recoveries")
        lostHandlers = recorder.register("workflow.lost_handlers")
        executedTicks = PowerState.allCases.map { recorder.register("workflow.engine_ticks", labels: [("power_state", $0.description)]) }
    }

    /// The per-sequence slot of an instance's sequence (sub-sequences share slot 0's
    /// counters only if they are also started directly; otherwise they are not counted).
    func slot(_ sequence: String) -> Int? { sequenceIndex[sequence] }
}
