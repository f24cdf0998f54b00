import LabKernel

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
/// runs to its end first.
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
    let program: Program
    let now: Instant
    let config: MobileEngineConfig
    let wallClock: WallClockOrigin
    var dispatch: [Int32] = []
    var childStarts: [ChildStart] = []
    var effects: [EngineEffect] = []

    init(instance: WorkflowInstance, program: Program, now: Instant, config: MobileEngineConfig, wallClock: WallClockOrigin) {
        self.instance = instance
        self.program = program
        self.now = now
        self.config = config
        self.wallClock = wallClock
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
        case .failed: return .failed(instance.nodes[Int(n)].error ?? "failed")
        case .cancelled: return .cancelled
        case .pending:
            if let early = activate(n) { return early }
        case .running, .waiting: break
        }
        switch instance.nodes[Int(n)].kind {
        case .list: return driveList(n, program.list(instance.nodes[Int(n)].kind))
        case .block(let b):
            switch program.blocks[Int(b)] {
            case .step(let step): return driveStep(n, step)
            case .router: return driveChosenList(n)
            case .abSplit: return driveChosenList(n)
            case .cancellationScope: return driveChosenList(n)
            case .parallel: return driveParallel(n, branches: program.lists[Int(b)].count)
            case .race(let race): return driveRace(n, branches: program.lists[Int(b)].count, semantics: race.semantics)
            case .loop(let loop): return driveLoop(n, b, loop)
            case .forEach(let each): return driveForEach(n, b, each)
            case .tryCatch(let tc): return driveTryCatch(n, b, hasFinally: tc.finallyBlocks != nil, id: tc.id)
            case .subSequence: return .blocked
            }
        }
    }

    /// Starts a pending node; returns a result when starting already decides it.
    mutating func activate(_ n: Int32) -> Progress? {
        instance.nodes[Int(n)].state = .running
        instance.nodes[Int(n)].startedAt = now
        guard case .block(let b) = instance.nodes[Int(n)].kind else { return nil }
        let block = program.blocks[Int(b)]
        switch block {
        case .step(let step):
            if let when = step.when, !when.isTrue(in: instance.data) {
                finish(n, .skipped)
                return .done
            }
            telemetry(.stepStarted, block: step.id, detail: step.handler)
            if config.inputGate == .beforeHandler, let wait = step.waitForInput {
                enterWaiting(n, step, wait)
            }
        case .router(let router):
            let chosen = router.routes.firstIndex { $0.condition.isTrue(in: instance.data) }
            if let chosen {
                instance.nodes[Int(n)].cursor = Int32(chosen)
            } else if router.defaultBlocks != nil {
                instance.nodes[Int(n)].cursor = Int32(router.routes.count)
            } else {
                instance.nodes[Int(n)].cursor = -1
                finish(n, .completed)
                return .done
            }
        case .abSplit(let split):
            let chosen = chooseVariant(split)
            instance.nodes[Int(n)].cursor = Int32(chosen)
            instance.data[split.id] = ["variant": .string(split.variants[chosen].name)]
        case .forEach(let each):
            let value = each.collection.value(in: instance.data)
            guard case .array(let items) = value else {
                let found = value == .null ? "nothing" : value.canonicalText
                fail(n, "collection '\(each.collection)' is not a list (found \(found))")
                return .failed(instance.nodes[Int(n)].error!)
            }
            instance.nodes[Int(n)].items = items
        case .subSequence(let sub):
            childStarts.append(ChildStart(node: n, block: sub))
        case .cancellationScope, .parallel, .race, .loop, .tryCatch:
            break
        }
        return nil
    }

    // MARK: Lists and chosen lists

    mutating func driveList(_ n: Int32, _ blocks: [Int32]) -> Progress {
        while true {
            let cursor = Int(instance.nodes[Int(n)].cursor)
            if cursor >= blocks.count {
                finish(n, .completed)
                return .done
            }
            let child: Int32
            if cursor < instance.nodes[Int(n)].children.count {
                child = instance.nodes[Int(n)].children[cursor]
            } else {
                if instance.cancelRequested && !isProtected(n) {
                    finish(n, .cancelled)
                    return .cancelled
                }
                child = addChild(of: n, kind: .block(blocks[cursor]))
            }
            switch drive(child) {
            case .done: instance.nodes[Int(n)].cursor += 1
            case .blocked: return .blocked
            case .failed(let error):
                fail(n, error)
                return .failed(error)
            case .cancelled:
                finish(n, .cancelled)
                return .cancelled
            }
        }
    }

    /// Routers, splits and scopes run one child list: the one in `cursor`.
    mutating func driveChosenList(_ n: Int32) -> Progress {
        guard case .block(let b) = instance.nodes[Int(n)].kind else { return .blocked }
        if instance.nodes[Int(n)].children.isEmpty {
            addChild(of: n, kind: .list(owner: b, list: instance.nodes[Int(n)].cursor))
        }
        return settle(n, with: drive(instance.nodes[Int(n)].children[0]))
    }

    // MARK: Parallel and race

    mutating func driveParallel(_ n: Int32, branches: Int) -> Progress {
        ensureBranches(n, branches)
        var allDone = true
        for child in instance.nodes[Int(n)].children {
            switch drive(child) {
            case .done: continue
            case .blocked: allDone = false
            case .failed(let error):
                cancelSiblings(of: n, except: child)
                fail(n, error)
                return .failed(error)
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

    mutating func driveRace(_ n: Int32, branches: Int, semantics: RaceSemantics) -> Progress {
        ensureBranches(n, branches)
        var failures = 0
        var lastError = "every branch failed"
        for (index, child) in instance.nodes[Int(n)].children.enumerated() {
            switch drive(child) {
            case .done:
                instance.nodes[Int(n)].cursor = Int32(index)
                cancelSiblings(of: n, except: child)
                finish(n, .completed)
                return .done
            case .blocked: continue
            case .failed(let error):
                if semantics == .firstToResolve {
                    cancelSiblings(of: n, except: child)
                    fail(n, error)
                    return .failed(error)
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
        if failures == branches {
            fail(n, "every branch of the race failed; last: \(lastError)")
            return .failed(instance.nodes[Int(n)].error!)
        }
        return .blocked
    }

    mutating func ensureBranches(_ n: Int32, _ count: Int) {
        guard instance.nodes[Int(n)].children.isEmpty, case .block(let b) = instance.nodes[Int(n)].kind else { return }
        for branch in 0..<count { addChild(of: n, kind: .list(owner: b, list: Int32(branch))) }
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
                    guard loop.continueOnError else {
                        fail(n, error)
                        return .failed(error)
                    }
                    instance.nodes[Int(n)].cursor += 1
                }
                continue
            }
            if Int(instance.nodes[Int(n)].cursor) >= loop.maxIterations || !loop.condition.isTrue(in: instance.data) {
                finish(n, .completed)
                return .done
            }
            if instance.cancelRequested && !isProtected(n) {
                finish(n, .cancelled)
                return .cancelled
            }
            addChild(of: n, kind: .list(owner: b, list: 0))
        }
    }

    mutating func driveForEach(_ n: Int32, _ b: Int32, _ each: ForEachBlock) -> Progress {
        let items = instance.nodes[Int(n)].items ?? []
        while true {
            if let current = activeIteration(n) {
                switch drive(current) {
                case .blocked: return .blocked
                case .done: instance.nodes[Int(n)].cursor += 1
                case .failed(let error):
                    instance.data[each.itemVar] = nil
                    fail(n, error)
                    return .failed(error)
                case .cancelled:
                    finish(n, .cancelled)
                    return .cancelled
                }
                continue
            }
            let index = Int(instance.nodes[Int(n)].cursor)
            if index >= items.count || index >= each.maxIterations {
                instance.data[each.itemVar] = nil
                finish(n, .completed)
                return .done
            }
            if instance.cancelRequested && !isProtected(n) {
                finish(n, .cancelled)
                return .cancelled
            }
            instance.data[each.itemVar] = items[index]
            addChild(of: n, kind: .list(owner: b, list: 0))
        }
    }

    /// The current iteration's body, if one is started and not finished.
    func activeIteration(_ n: Int32) -> Int32? {
        let node = instance.nodes[Int(n)]
        guard let last = node.children.last, node.children.count > Int(node.cursor) else { return nil }
        return last
    }

    // MARK: try / catch / finally

    /// Phases in `cursor`: 0 try, 1 catch, 2 finally. A failure to re-raise after the
    /// finally block waits in the node's `error`.
    mutating func driveTryCatch(_ n: Int32, _ b: Int32, hasFinally: Bool, id: String) -> Progress {
        while true {
            let phase = instance.nodes[Int(n)].cursor
            let children = instance.nodes[Int(n)].children
            let child = Int(phase) < children.count ? children[Int(phase)] : addChild(of: n, kind: .list(owner: b, list: phase))
            let result = drive(child)
            switch (phase, result) {
            case (_, .blocked): return .blocked
            case (_, .cancelled):
                finish(n, .cancelled)
                return .cancelled
            case (0, .done), (1, .done):
                instance.nodes[Int(n)].error = nil
                guard hasFinally else { return settle(n, with: .done) }
                skipTo(n, phase: 2)
            case (0, .failed(let error)):
                instance.data[id] = ["error": .string(error)]
                skipTo(n, phase: 1)
            case (1, .failed(let error)):
                guard hasFinally else { return settle(n, with: .failed(error)) }
                instance.nodes[Int(n)].error = error
                skipTo(n, phase: 2)
            case (_, .done):
                return settle(n, with: instance.nodes[Int(n)].error.map { .failed($0) } ?? .done)
            case (_, .failed(let error)):
                return settle(n, with: .failed(error))
            }
        }
    }

    /// Moves a try/catch to `phase`, keeping `children[phase]` aligned with the phase.
    mutating func skipTo(_ n: Int32, phase: Int32) {
        guard case .block(let b) = instance.nodes[Int(n)].kind else { return }
        while instance.nodes[Int(n)].children.count < Int(phase) {
            let skipped = addChild(of: n, kind: .list(owner: b, list: Int32(instance.nodes[Int(n)].children.count)))
            finish(skipped, .skipped)
        }
        instance.nodes[Int(n)].cursor = phase
    }

    // MARK: Steps

    mutating func driveStep(_ n: Int32, _ step: StepBlock) -> Progress {
        let node = instance.nodes[Int(n)]
        if node.state == .waiting || node.inFlight { return .blocked }
        if let retryAt = node.retryAt, retryAt > now { return .blocked }
        if instance.cancelRequested && step.cancellable && !isProtected(n) {
            finish(n, .cancelled)
            return .cancelled
        }
        dispatch.append(n)
        return .blocked
    }

    mutating func enterWaiting(_ n: Int32, _ step: StepBlock, _ wait: WaitForInput) {
        instance.nodes[Int(n)].state = .waiting
        instance.nodes[Int(n)].deadline = wait.timeout.map { now + $0 }
        effects.append(.stepPending(instanceID: instance.id, stepName: step.id, handler: step.handler))
    }

    // MARK: Helpers

    @discardableResult
    mutating func addChild(of n: Int32, kind: NodeKind) -> Int32 {
        let child = Int32(instance.nodes.count)
        instance.nodes.append(ExecNode(kind: kind, parent: n, state: .pending))
        instance.nodes[Int(n)].children.append(child)
        return child
    }

    mutating func settle(_ n: Int32, with result: Progress) -> Progress {
        switch result {
        case .done: finish(n, .completed)
        case .failed(let error): fail(n, error)
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

    mutating func fail(_ n: Int32, _ error: String) {
        instance.nodes[Int(n)].error = error
        finish(n, .failed)
    }

    /// Cancels every unfinished node under the other children of `n` (race losers, the
    /// rest of a failed parallel).
    mutating func cancelSiblings(of n: Int32, except winner: Int32) {
        for child in instance.nodes[Int(n)].children where child != winner {
            cancelSubtree(child)
        }
    }

    mutating func cancelSubtree(_ n: Int32) {
        if !instance.nodes[Int(n)].state.isFinished {
            finish(n, .cancelled)
            instance.nodes[Int(n)].inFlight = false
        }
        for child in instance.nodes[Int(n)].children { cancelSubtree(child) }
    }

    /// Inside a cancellation scope, or a step that may not be cancelled.
    func isProtected(_ n: Int32) -> Bool { Self.isProtected(n, in: instance, program: program) }

    static func isProtected(_ n: Int32, in instance: WorkflowInstance, program: Program) -> Bool {
        var current = n
        while current >= 0 {
            let node = instance.nodes[Int(current)]
            if case .block(let b) = node.kind {
                switch program.blocks[Int(b)] {
                case .cancellationScope: return true
                case .step(let step) where !step.cancellable: return true
                default: break
                }
            }
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

    mutating func telemetry(_ kind: TelemetryEvent.Kind, block: String?, detail: String) {
        guard config.telemetryEnabled else { return }
        effects.append(.telemetry(TelemetryEvent(kind: kind, instanceID: instance.id, blockID: block, detail: detail,
                                                 timestamp: wallClock.rfc3339(at: now))))
    }
}
