import LabKernel
import Orch8Wire

/// An instance's earliest timer of each kind, as of its last flush.
///
/// The engine asks for timers on every tick (`fireTimers`) and a driver asks for the next
/// deadline after it (`nextDeadline`). Walking every instance's tree for them read every
/// tree of the device each tick, however few had a timer; these summaries are 32 bytes an
/// instance beside the instances. Between flushes a summary can only be early: a timer set
/// then goes into it as it is set (`include`), a cleared one stays until the flush brings
/// the summary up to date. `fireTimers` can act on an early summary (the tree decides);
/// `nextDeadline` must not report a timer that is gone, so it reads an instance changed
/// since its flush in full.
struct InstanceTimers: Sendable {
    /// Raw nanoseconds; `none` when there is no such timer (and for a finished instance).
    private var retry = none
    private var handlerTimeout = none
    private var inputTimeout = none
    private var created = none
    private static let none = Int64.max

    /// Takes the instance's parts rather than the instance: handed an element of the
    /// engine's instances, a call that is not inlined copies the whole instance first.
    init(state: InstanceState, createdAt: Instant, nodes: [ExecNode]) {
        guard !state.isTerminal else { return }
        created = createdAt.nanoseconds
        for node in nodes {
            if let t = node.retryAt?.nanoseconds, t < retry { retry = t }
            if let t = node.deadline?.nanoseconds {
                if node.inFlight {
                    if t < handlerTimeout { handlerTimeout = t }
                } else if t < inputTimeout {
                    inputTimeout = t
                }
            }
        }
    }

    /// Takes in a timer set between flushes (a retry after a failed result, the wait after
    /// a handler), so the summary never shows a timer later than the tree's.
    mutating func include(retry t: Instant) { retry = min(retry, t.nanoseconds) }
    mutating func include(inputTimeout t: Instant) { inputTimeout = min(inputTimeout, t.nanoseconds) }

    /// The earliest timer of `kinds`; the lifetime timer ends `lifetime` after creation.
    func earliest(_ kinds: TimerKinds, lifetime: TimeSpan) -> Instant? {
        var t = Self.none
        if kinds.contains(.retries) { t = min(t, retry) }
        if kinds.contains(.handlerTimeouts) { t = min(t, handlerTimeout) }
        if kinds.contains(.inputTimeouts) { t = min(t, inputTimeout) }
        if kinds.contains(.lifetime), created != Self.none { t = min(t, (Instant(nanoseconds: created) + lifetime).nanoseconds) }
        return t == Self.none ? nil : Instant(nanoseconds: t)
    }
}

extension MobileEngine {
    /// The earliest timer of `kinds` of instance `index`, or nil (none, or finished).
    func nextTimer(_ index: Int, kinds: TimerKinds) -> Instant? {
        // Changed since its last flush: its summary may be out of date.
        let timers = flags[index] & 2 != 0 ? summarizeTimers(index) : timers[index]
        return timers.earliest(kinds, lifetime: config.instanceLifetime)
    }

    func summarizeTimers(_ index: Int) -> InstanceTimers {
        InstanceTimers(state: instances[index].state, createdAt: instances[index].createdAt, nodes: instances[index].nodes)
    }

    /// Handler timeouts, input timeouts and due retries.
    ///
    /// Reads only the summaries, also for instances changed since their last flush: their
    /// changes since then only cleared timers (results, answers, cancels) or added them
    /// through `include` (see `handlerFinished` and `stepFailed`), so a summary may show a
    /// timer that is gone, never miss one that is due. A summary that is due sends the
    /// instance's tree to be checked, which decides. Reading every changed instance's tree
    /// here cost a pass over all the trees of a busy device before the walk read them again.
    mutating func fireTimers(now: Instant) {
        let lifetime = config.instanceLifetime
        for index in instances.indices {
            guard let due = timers[index].earliest(.all, lifetime: lifetime), due <= now, !instances[index].state.isTerminal else { continue }
            if instances[index].createdAt + lifetime <= now {
                abort(index, "instance lifetime exceeded (maxInstanceLifetimeSecs is \(config.maxInstanceLifetimeSecs))", now: now)
                continue
            }
            for n in instances[index].nodes.indices {
                let node = instances[index].nodes[n]
                if let retryAt = node.retryAt, retryAt <= now, !node.inFlight {
                    markDirty(index)
                } else if let deadline = node.deadline, deadline <= now {
                    if node.inFlight {
                        inFlightCount -= 1
                        instances[index].nodes[n].inFlight = false
                        stepFailed(index, Int32(n), .retryable("the handler did not answer in time (handlerTimeoutMs or the step's timeout)"),
                                   now: now)
                    } else if node.state == .waiting {
                        instances[index].nodes[n].state = .failed
                        instances[index].nodeErrors[Int32(n)] = "no input within the wait timeout"
                        instances[index].nodes[n].completedAt = now
                        instances[index].nodes[n].deadline = nil
                        markDirty(index)
                        markChanged(index)
                    }
                }
            }
        }
    }
}
