import LabKernel
import Orch8Wire

/// Advances one instance's execution tree as far as it can go without waiting.
///
/// Theory of operation. `run()` drives the root list node. Driving a node that has
/// finished answers at once; a pending node is activated (timestamped, its `when`
/// checked, its route or variant chosen); a running node makes what progress it can and
/// reports `.blocked` at the first thing that must wait. The walk is re-entrant: all
/// progress lives in the nodes (`cursor`, `children`, states), so driving the same tree
/// twice with nothing new changes nothing. The interpreter asks its engine for what it
/// cannot do alone through its outputs: steps to dispatch, child instances to start or
/// cancel, invocations to drop, telemetry and listener callbacks.
///
/// Cancellation: once `cancelRequested` is set, a list starts no new block and reports
/// `.cancelled`, except inside a `cancellation_scope` (or a non-cancellable step), which
/// runs to its end first ("shielded").
struct Interpreter {
    enum Progress: Equatable {
        case done
        case failed(String)
        case blocked
        case cancelled
    }

    struct ChildStart: Equatable {
        var node: Int32
        var block: SubSequenceBlock
    }

    var instance: WorkflowInstance
    private(set) var program: Program
    private(set) var now: Instant
    private(set) var inputGate: InputGate
    /// `now` as RFC 3339, formatted once per tick by the engine; nil when telemetry is off.
    private(set) var timestamp: String?
    var dispatch: [Int32] = []
    var childStarts: [ChildStart] = []
    var effects: [EngineEffect] = []
    /// Telemetry recorded by the walk (the engine's buffer, swapped in).
    var telemetry: [TelemetryEvent] = []
    /// Handler invocations in flight that the walk cancelled (race losers, the rest of a
    /// failed parallel): their slots are free again.
    var cancelledInFlight = 0

    init(instance: WorkflowInstance, program: Program, now: Instant, inputGate: InputGate, timestamp: String?) {
        self.instance = instance
        self.program = program
        self.now = now
        self.inputGate = inputGate
        self.timestamp = timestamp
    }

    /// Readies a reused interpreter for its next walk: new settings, empty outputs (their
    /// capacity kept).
    mutating func prepare(program: Program, now: Instant, inputGate: InputGate, timestamp: String?) {
        self.program = program
        self.now = now
        self.inputGate = inputGate
        self.timestamp = timestamp
        dispatch.removeAll(keepingCapacity: true)
        childStarts.removeAll(keepingCapacity: true)
        effects.removeAll(keepingCapacity: true)
        cancelledInFlight = 0
    }

    mutating func run() -> Progress {
        if instance.nodes.isEmpty {
            instance.nodes.append(ExecNode(kind: .list(owner: -1, list: 0), parent: -1, state: .pending))
        }
        return drive(0)
    }

    // MARK: Dispatching on node kind

    mutating func drive(_ n: Int32) -> Progress {
        switch instance.nodes[Int(n)].state {
        case .completed, .skipped: return .done
        case .failed: return .failed(instance.nodeErrors[n] ?? "failed")
        case .cancelled: return .cancelled
        case .pending:
            // A graceful update holds back new steps until it switches the sequence.
            if instance.pendingUpdate != nil, case .block(let b) = instance.nodes[Int(n)].kind, program.kinds[Int(b)] == .step {
                return .blocked
            }
            if let early = activate(n) { return early }
        case .running, .waiting: break
        }
        let kind = instance.nodes[Int(n)].kind
        guard case .block(let b) = kind else { return driveList(n, program.list(kind)) }
        switch program.kinds[Int(b)] {
        case .step: return driveStep(n, program.steps[Int(b)]!)
        case .router, .abSplit: return driveChosenList(n, b)
        case .cancellationScope: return driveScope(n, b)
        case .parallel: return driveParallel(n, b)
        case .race(let firstToSucceed): return driveRace(n, b, firstToSucceed: firstToSucceed)
        case .loop:
            guard case .loop(let loop) = program.blocks[Int(b)] else { return .blocked }
            return driveLoop(n, b, loop)
        case .forEach:
            guard case .forEach(let each) = program.blocks[Int(b)] else { return .blocked }
            return driveForEach(n, b, each)
        case .tryCatch: return driveTryCatch(n, b)
        case .subSequence: return .blocked
        }
    }

    /// Starts a pending node; returns a result when starting already decides it.
    mutating func activate(_ n: Int32) -> Progress? {
        instance.nodes[Int(n)].state = .running
        instance.nodes[Int(n)].startedAt = now
        guard case .block(let b) = instance.nodes[Int(n)].kind else { return nil }
        switch program.kinds[Int(b)] {
        case .step:
            let step = program.steps[Int(b)]!
            if instance.skipSteps.contains(step.id) {
                finish(n, .completed)
                return .done
            }
            if let when = step.when, !when.isTrue(in: instance.data) {
                finish(n, .skipped)
                return .done
            }
            record(.stepStarted, block: step.id, detail: step.handler)
            if inputGate == .beforeHandler, step.waits { enterWaiting(n, step) }
        case .router:
            guard case .router(let router) = program.blocks[Int(b)] else { return nil }
            if let chosen = router.routes.firstIndex(where: { $0.condition.isTrue(in: instance.data) }) {
                instance.nodes[Int(n)].cursor = Int32(chosen)
            } else if router.defaultBlocks != nil {
                instance.nodes[Int(n)].cursor = Int32(router.routes.count)
            } else {
                instance.nodes[Int(n)].cursor = -1
                finish(n, .completed)
                return .done
            }
        case .abSplit:
            guard case .abSplit(let split) = program.blocks[Int(b)] else { return nil }
            let chosen = chooseVariant(split)
            instance.nodes[Int(n)].cursor = Int32(chosen)
            instance.data[split.id] = ["variant": .string(split.variants[chosen].name)]
        case .forEach:
            guard case .forEach(let each) = program.blocks[Int(b)] else { return nil }
            let value = each.collection.value(in: instance.data)
            guard case .array(let items) = value else {
                let found = value == .null ? "nothing" : value.canonicalText
                return fail(n, "collection '\(each.collection)' is not a list (found \(found))")
            }
            instance.forEachItems[n] = items
        case .subSequence:
            guard case .subSequence(let sub) = program.blocks[Int(b)] else { return nil }
            childStarts.append(ChildStart(node: n, block: sub))
        case .cancellationScope, .parallel, .race, .loop, .tryCatch:
            break
        }
        return nil
    }

    // MARK: Lists and chosen lists

    mutating func driveList(_ n: Int32, _ blocks: [Int32]) -> Progress {
        var child = instance.nodes[Int(n)].lastChild
        while true {
            let cursor = Int(instance.nodes[Int(n)].cursor)
            if cursor >= blocks.count {
                finish(n, .completed)
                return .done
            }
            // A list's children are its blocks in order; the last child is the current one.
            if cursor >= Int(instance.nodes[Int(n)].childCount) {
                if instance.cancelRequested && !isShielded(n) {
                    finish(n, .cancelled)
                    return .cancelled
                }
                child = instance.addChild(of: n, kind: .block(blocks[cursor]))
            }
            switch drive(child) {
            case .done: instance.nodes[Int(n)].cursor += 1
            case .blocked: return .blocked
            case .failed(let error): return fail(n, error)
            case .cancelled:
                finish(n, .cancelled)
                return .cancelled
            }
        }
    }

    /// Routers, splits and scopes run one child list: the one in `cursor`.
    mutating func driveChosenList(_ n: Int32, _ b: Int32) -> Progress {
        if instance.nodes[Int(n)].childCount == 0 {
            instance.addChild(of: n, kind: .list(owner: b, list: max(0, instance.nodes[Int(n)].cursor)))
        }
        return settle(n, with: drive(instance.nodes[Int(n)].firstChild))
    }

    /// A scope runs its body (shielded from a cancel: see `isShielded`); when a cancel was
    /// requested by the time the body ends and the scope has cleanup blocks, they run
    /// next, and the scope ends with the body's result.
    mutating func driveScope(_ n: Int32, _ b: Int32) -> Progress {
        if instance.nodes[Int(n)].childCount == 0 { instance.addChild(of: n, kind: .list(owner: b, list: 0)) }
        let body = drive(instance.nodes[Int(n)].firstChild)
        guard body != .blocked else { return .blocked }
        guard instance.cancelRequested, program.lists[Int(b)].count > 1 else { return settle(n, with: body) }
        if instance.nodes[Int(n)].childCount == 1 { instance.addChild(of: n, kind: .list(owner: b, list: 1)) }
        switch drive(instance.nodes[Int(n)].lastChild) {
        case .blocked: return .blocked
        case .failed(let error): return settle(n, with: .failed(error))
        case .done, .cancelled: return settle(n, with: body)
        }
    }

    // MARK: Parallel and race

    mutating func driveParallel(_ n: Int32, _ b: Int32) -> Progress {
        ensureBranches(n, b)
        var allDone = true
        for child in instance.children(of: n) {
            switch drive(child) {
            case .done: continue
            case .blocked: allDone = false
            case .failed(let error):
                cancelSiblings(of: n, except: child)
                return fail(n, error)
            case .cancelled:
                cancelSiblings(of: n, except: child)
                finish(n, .cancelled)
                return .cancelled
            }
        }
        if allDone {
            finish(n, .completed)
            return .done
        }
        return .blocked
    }

    mutating func driveRace(_ n: Int32, _ b: Int32, firstToSucceed: Bool) -> Progress {
        ensureBranches(n, b)
        let children = instance.children(of: n)
        var failures = 0
        var lastError = "every branch failed"
        for (index, child) in children.enumerated() {
            switch drive(child) {
            case .done:
                instance.nodes[Int(n)].cursor = Int32(index)
                cancelSiblings(of: n, except: child)
                finish(n, .completed)
                return .done
            case .blocked: continue
            case .failed(let error):
                if !firstToSucceed {
                    cancelSiblings(of: n, except: child)
                    return fail(n, error)
                }
                failures += 1
                lastError = error
            case .cancelled:
                if instance.cancelRequested {
                    cancelSiblings(of: n, except: child)
                    finish(n, .cancelled)
                    return .cancelled
                }
                failures += 1
            }
        }
        if failures == children.count { return fail(n, "every branch of the race failed; last: \(lastError)") }
        return .blocked
    }

    mutating func ensureBranches(_ n: Int32, _ b: Int32) {
        guard instance.nodes[Int(n)].childCount == 0 else { return }
        for branch in program.lists[Int(b)].indices { instance.addChild(of: n, kind: .list(owner: b, list: Int32(branch))) }
    }

    // MARK: Loops

    mutating func driveLoop(_ n: Int32, _ b: Int32, _ loop: LoopBlock) -> Progress {
        while true {
            if let current = activeIteration(n) {
                switch drive(current) {
                case .blocked: return .blocked
                case .cancelled:
                    finish(n, .cancelled)
                    return .cancelled
                case .done:
                    instance.nodes[Int(n)].cursor += 1
                    if let breakOn = loop.breakOn, breakOn.isTrue(in: instance.data) {
                        finish(n, .completed)
                        return .done
                    }
                case .failed(let error):
                    guard loop.continueOnError else { return fail(n, error) }
                    instance.nodes[Int(n)].cursor += 1
                }
                continue
            }
            if Int(instance.nodes[Int(n)].cursor) >= loop.maxIterations || !loop.condition.isTrue(in: instance.data) {
                finish(n, .completed)
                return .done
            }
            if instance.cancelRequested && !isShielded(n) {
                finish(n, .cancelled)
                return .cancelled
            }
            instance.addChild(of: n, kind: .list(owner: b, list: 0))
        }
    }

    mutating func driveForEach(_ n: Int32, _ b: Int32, _ each: ForEachBlock) -> Progress {
        let items = instance.forEachItems[n] ?? []
        while true {
            if let current = activeIteration(n) {
                switch drive(current) {
                case .blocked: return .blocked
                case .done: instance.nodes[Int(n)].cursor += 1
                case .failed(let error):
                    instance.data[each.itemVar] = nil
                    return fail(n, error)
                case .cancelled:
                    finish(n, .cancelled)
                    return .cancelled
                }
                continue
            }
            let index = Int(instance.nodes[Int(n)].cursor)
            if index >= items.count || index >= each.maxIterations {
                instance.data[each.itemVar] = nil
                instance.forEachItems[n] = nil
                finish(n, .completed)
                return .done
            }
            if instance.cancelRequested && !isShielded(n) {
                finish(n, .cancelled)
                return .cancelled
            }
            instance.data[each.itemVar] = items[index]
            instance.addChild(of: n, kind: .list(owner: b, list: 0))
        }
    }

    /// The current iteration's body, if one is started and not yet counted.
    func activeIteration(_ n: Int32) -> Int32? {
        let node = instance.nodes[Int(n)]
        return node.childCount > node.cursor ? node.lastChild : nil
    }

    // MARK: try / catch / finally

    /// Phases in `cursor`: 0 try, 1 catch, 2 finally. A failure to re-raise after the
    /// finally block waits in the node's error entry.
    mutating func driveTryCatch(_ n: Int32, _ b: Int32) -> Progress {
        let hasFinally = program.lists[Int(b)].count > 2
        while true {
            let phase = instance.nodes[Int(n)].cursor
            let child = Int(phase) < Int(instance.nodes[Int(n)].childCount)
                ? instance.child(of: n, at: Int(phase)) : instance.addChild(of: n, kind: .list(owner: b, list: phase))
            switch (phase, drive(child)) {
            case (_, .blocked): return .blocked
            case (_, .cancelled):
                finish(n, .cancelled)
                return .cancelled
            case (0, .done), (1, .done):
                instance.nodeErrors[n] = nil
                guard hasFinally else { return settle(n, with: .done) }
                skipTo(n, b, phase: 2)
            case (0, .failed(let error)):
                instance.data[program.blocks[Int(b)].id] = ["error": .string(error)]
                skipTo(n, b, phase: 1)
            case (1, .failed(let error)):
                guard hasFinally else { return settle(n, with: .failed(error)) }
                instance.nodeErrors[n] = error
                skipTo(n, b, phase: 2)
            case (_, .done):
                return settle(n, with: instance.nodeErrors[n].map { .failed($0) } ?? .done)
            case (_, .failed(let error)):
                return settle(n, with: .failed(error))
            }
        }
    }

    /// Moves a try/catch to `phase`, keeping child `phase` aligned with the phase.
    mutating func skipTo(_ n: Int32, _ b: Int32, phase: Int32) {
        while instance.nodes[Int(n)].childCount < phase {
            let skipped = instance.addChild(of: n, kind: .list(owner: b, list: instance.nodes[Int(n)].childCount))
            finish(skipped, .skipped)
        }
        instance.nodes[Int(n)].cursor = phase
    }

    // MARK: Steps

    mutating func driveStep(_ n: Int32, _ step: StepSpec) -> Progress {
        let node = instance.nodes[Int(n)]
        if node.state == .waiting || node.inFlight { return .blocked }
        if let retryAt = node.retryAt, retryAt > now { return .blocked }
        if instance.cancelRequested && step.cancellable && !isShielded(n) {
            finish(n, .cancelled)
            return .cancelled
        }
        dispatch.append(n)
        return .blocked
    }

    mutating func enterWaiting(_ n: Int32, _ step: StepSpec) {
        instance.nodes[Int(n)].state = .waiting
        instance.nodes[Int(n)].deadline = step.waitTimeout.map { now + $0 }
        effects.append(.stepPending(instanceID: instance.instanceID, stepName: step.id, handler: step.handler))
    }

    // MARK: Helpers

    mutating func settle(_ n: Int32, with result: Progress) -> Progress {
        switch result {
        case .done: finish(n, .completed)
        case .failed(let error): return fail(n, error)
        case .cancelled: finish(n, .cancelled)
        case .blocked: break
        }
        return result
    }

    mutating func finish(_ n: Int32, _ state: NodeState) {
        instance.nodes[Int(n)].state = state
        instance.nodes[Int(n)].completedAt = now
        instance.nodes[Int(n)].deadline = nil
        instance.nodes[Int(n)].retryAt = nil
    }

    /// Fails node `n` with `error` and reports the failure upward.
    mutating func fail(_ n: Int32, _ error: String) -> Progress {
        instance.nodeErrors[n] = error
        finish(n, .failed)
        return .failed(error)
    }

    /// Cancels every unfinished node under the other children of `n` (race losers, the
    /// rest of a failed parallel).
    mutating func cancelSiblings(of n: Int32, except winner: Int32) {
        for child in instance.children(of: n) where child != winner { cancelSubtree(child) }
    }

    mutating func cancelSubtree(_ n: Int32) {
        if !instance.nodes[Int(n)].state.isFinished {
            finish(n, .cancelled)
            if instance.nodes[Int(n)].inFlight { cancelledInFlight += 1 }
            instance.nodes[Int(n)].inFlight = false
        }
        for child in instance.children(of: n) { cancelSubtree(child) }
    }

    /// Inside a cancellation scope, or a step that may not be cancelled.
    func isShielded(_ n: Int32) -> Bool { Self.isShielded(n, in: instance, program: program) }

    static func isShielded(_ n: Int32, in instance: WorkflowInstance, program: Program) -> Bool {
        var current = n
        while current >= 0 {
            let node = instance.nodes[Int(current)]
            if case .block(let b) = node.kind, program.shields[Int(b)] { return true }
            current = node.parent
        }
        return false
    }

    mutating func chooseVariant(_ split: ABSplitBlock) -> Int {
        let total = split.variants.reduce(UInt64(0)) { $0 + UInt64($1.weight) }
        var pick = instance.generator.next(below: total)
        for (index, variant) in split.variants.enumerated() {
            if pick < UInt64(variant.weight) { return index }
            pick -= UInt64(variant.weight)
        }
        return split.variants.count - 1
    }

    mutating func record(_ kind: TelemetryEvent.Kind, block: String?, detail: String) {
        guard let timestamp else { return }
        telemetry.append(TelemetryEvent(kind: kind, instanceID: instance.instanceID, blockID: block, detail: detail, timestamp: timestamp))
    }
}
