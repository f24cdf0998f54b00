import DeviceWorkflows
import Orch8Wire
import LabKernel

/// The scenario's workflows, compiled once for the whole fleet: every app launch of every
/// device loads the same sequences, and parsing their JSON each time would cost more than
/// running them.
struct WorkflowCatalog {
    /// Each workload's sequence followed by the extra sequences it loads.
    let sequencesOfWorkload: [[CompiledSequence]]
    /// Compiled sequences by JSON text, for restores from a device's store.
    let byJSON: [String: CompiledSequence]
    /// Handlers the simulated engines register: the built-in ones and every handler the
    /// scenario's sequences name (those succeed with an empty output).
    let handlerNames: Set<String>
    /// How people answer, by sequence name and step id.
    let answers: [String: [String: AnswerModel]]

    init(_ settings: WorkflowSettings) {
        var names = BuiltinHandlers.names
        var byJSON: [String: CompiledSequence] = [:]
        var answers: [String: [String: AnswerModel]] = [:]
        var sequences: [[CompiledSequence]] = []
        for workload in settings.workloads {
            // The scenario decoder compiled these already; one that fails now is skipped.
            let compiled = ([workload.sequenceJSON] + workload.extraSequences).compactMap {
                try? CompiledSequence(json: $0, handlers: nil)
            }
            for sequence in compiled {
                byJSON[sequence.json] = sequence
                names.formUnion(sequence.definition.handlers)
            }
            sequences.append(compiled)
            answers[workload.sequenceName, default: [:]].merge(workload.answers) { first, _ in first }
        }
        sequencesOfWorkload = sequences
        self.byJSON = byJSON
        handlerNames = names
        self.answers = answers
    }

    /// Each workload's sequence name with the ids of its steps, for the metrics.
    var stepsOfWorkloads: [(name: String, steps: [String])] {
        sequencesOfWorkload.compactMap { sequences in
            sequences.first.map { sequence in
                var steps: [String] = []
                Block.visit(sequence.definition.blocks) { if case .step(let step) = $0 { steps.append(step.id) } }
                return (sequence.name, steps)
            }
        }
    }

    /// Whether the scenario has people answer this step on the phone.
    func answeredOnDevice(sequence: String, step: String) -> Bool { answers[sequence]?[step] != nil }

    func answerModel(sequence: String, step: String) -> AnswerModel {
        answers[sequence]?[step] ?? .default
    }
}
