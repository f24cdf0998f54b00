import DeviceWorkflows
import Orch8Wire
import LabKernel

/// Metric handles of the workflow stack, by sequence (in workload order) and outcome.
struct WorkflowMetrics {
    enum Outcome: Int, MetricLabel {
        case completed, failed, cancelled
        var label: String { ["completed", "failed", "cancelled"][rawValue] }
    }

    enum Rejection: Int, MetricLabel {
        case resourceLimit, deviceOff, queueFull
        var label: String { ["resource_limit", "device_off", "queue_full"][rawValue] }
    }

    enum AnswerOutcome: Int, MetricLabel {
        case answered, never, lost
        var label: String { ["answered", "never", "lost"][rawValue] }
    }

    /// Sequence name → index into the per-sequence arrays.
    let sequenceIndex: [String: Int]
    let started: [MetricHandle]
    let finished: [LabelledHandles<Outcome>]
    let steps: [MetricHandle]
    let retries: [MetricHandle]
    /// Per sequence, by step id.
    let stepLatency: [[String: MetricHandle]]
    let inputWait: [MetricHandle]
    let duration: [LabelledHandles<Outcome>]
    let rejected: LabelledHandles<Rejection>
    let answers: LabelledHandles<AnswerOutcome>
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
        finished = names.map { LabelledHandles("workflow.finished", label: "outcome", extra: [("sequence", $0)], recorder: &recorder) }
        steps = names.map { recorder.register("workflow.steps", labels: [("sequence", $0)]) }
        retries = names.map { recorder.register("workflow.retries", labels: [("sequence", $0)]) }
        stepLatency = zip(names, stepsOf).map { name, steps in
            Dictionary(steps.map { ($0, recorder.register("workflow.step_latency", labels: [("sequence", name), ("step", $0)])) },
                       uniquingKeysWith: { first, _ in first })
        }
        inputWait = names.map { recorder.register("workflow.input_wait", labels: [("sequence", $0)]) }
        duration = names.map { LabelledHandles("workflow.duration", label: "outcome", extra: [("sequence", $0)], recorder: &recorder) }
        rejected = LabelledHandles("workflow.rejected", label: "reason", recorder: &recorder)
        answers = LabelledHandles("workflow.answers", label: "outcome", recorder: &recorder)
        active = recorder.register("workflow.active")
        recoveries = recorder.register("workflow.recoveries")
        lostHandlers = recorder.register("workflow.lost_handlers")
        executedTicks = PowerState.allCases.map { recorder.register("workflow.engine_ticks", labels: [("power_state", $0.description)]) }
    }

    /// The per-sequence slot of an instance's sequence (sub-sequences share slot 0's
    /// counters only if they are also started directly; otherwise they are not counted).
    func slot(_ sequence: String) -> Int? { sequenceIndex[sequence] }
}
