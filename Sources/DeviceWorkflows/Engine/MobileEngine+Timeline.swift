public import LabKernel
import Orch8Wire

extension MobileEngine {
    /// The step timeline the sync reporter sends and `fleetlab workflow run` prints: every
    /// block in document order (composites included) with its latest state. Blocks not yet
    /// reached are `pending`; blocks on a route, variant or catch branch that was not taken
    /// are `skipped` (the real engine leaves them `pending`; skipped says more).
    public func timeline(of instanceID: String) -> [TimelineEntry] {
        index(of: instanceID).map(timeline(at:)) ?? []
    }

    /// The timeline of the instance at `index`.
    func timeline(at index: Int) -> [TimelineEntry] {
        let instance = instances[index], program = programOf[index]
        var latest: [Int32: ExecNode] = [:]
        var skipped: Set<Int32> = []
        for node in instance.nodes {
            switch node.kind {
            case .block(let b):
                latest[b] = node
                switch program.blocks[Int(b)] {
                case .router, .abSplit:
                    guard node.state != .pending else { break }
                    for (list, blocks) in program.lists[Int(b)].enumerated() where Int32(list) != node.cursor {
                        for block in blocks { markDescendants(block, program: program, into: &skipped) }
                    }
                default: break
                }
            case .list:
                if node.state == .skipped {
                    for block in program.list(node.kind) { markDescendants(block, program: program, into: &skipped) }
                }
            }
        }
        return program.blocks.enumerated().map { index, block in
            let node = latest[Int32(index)]
            var state = node?.state ?? .pending
            if node == nil && skipped.contains(Int32(index)) { state = .skipped }
            var handler: String?
            if case .step(let step) = block { handler = step.handler }
            return TimelineEntry(blockID: block.id, blockType: block.kind.rawValue, state: state, handler: handler,
                                 startedAt: node?.startedAt.map { wallClock.rfc3339(at: $0) },
                                 completedAt: node?.completedAt.map { wallClock.rfc3339(at: $0) })
        }
    }

    func markDescendants(_ block: Int32, program: Program, into set: inout Set<Int32>) {
        set.insert(block)
        for list in program.lists[Int(block)] { for child in list { markDescendants(child, program: program, into: &set) } }
    }

    /// Number of step blocks in a sequence and how many of them finished, for progress bars.
    public func progress(of instanceID: String) -> (done: Int, total: Int) {
        let steps = timeline(of: instanceID).filter { $0.blockType == BlockKind.step.rawValue }
        return (steps.filter { [.completed, .skipped, .failed, .cancelled].contains($0.state) }.count, steps.count)
    }
}

extension MobileEngine {
    /// How long each finished step of an instance took, from the tick that started it to
    /// its completion; `waited` marks steps with `wait_for_input` (their time includes the
    /// wait for a person).
    public func stepDurations(of instanceID: String) -> [(step: String, waited: Bool, duration: TimeSpan)] {
        guard let index = index(of: instanceID) else { return [] }
        return instances[index].nodes.compactMap { node in
            guard node.state == .completed, let step = programOf[index].step(node.kind),
                  let started = node.startedAt, let completed = node.completedAt else { return nil }
            return (step.id, step.wait != nil, completed - started)
        }
    }

    /// What a driver asks about a finished instance, without copying it.
    public func facts(of instanceID: String) -> (sequence: String, state: InstanceState, createdAt: Instant, topLevel: Bool)? {
        guard let index = index(of: instanceID) else { return nil }
        return (instances[index].sequenceName, instances[index].state, instances[index].createdAt, instances[index].parent == nil)
    }

    /// Active instances that are not sub-sequence children.
    public var activeTopLevelCount: Int {
        instances.reduce(0) { $0 + ($1.parent == nil && !$1.state.isTerminal ? 1 : 0) }
    }

    /// The value the first choice of waiting step `step` of `sequence` stores.
    public func firstChoice(sequence: String, step: String) -> String? {
        guard let program = program(named: sequence), let index = program.indexByID[step] else { return nil }
        return program.steps[Int(index)]?.wait?.effectiveChoices.first?.value
    }
}
