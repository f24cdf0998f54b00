import LabKernel
public import DeviceWorkflows
import Orch8Wire

/// A handler as the host keeps it. Wrapped so the closure is stored as its own type and
/// called directly: a closure stored straight in a dictionary is kept in the dictionary's
/// generic form, and every call went through a thunk that copied the call.
struct HandlerEntry {
    let run: BuiltinHandler
}

/// Handlers by name, remembering the last one found: the invocations of one tick are
/// mostly the same few steps of many instances, and comparing a name with the last one
/// (usually the very same string) is cheaper than hashing it.
struct HandlerLookup {
    private var byName: [String: HandlerEntry]
    private var lastName = ""
    private var last: HandlerEntry?

    init(_ handlers: [String: BuiltinHandler]) { byName = handlers.mapValues(HandlerEntry.init) }

    mutating func register(_ name: String, _ handler: @escaping BuiltinHandler) {
        byName[name] = HandlerEntry(run: handler)
        if name == lastName { last = byName[name] }
    }

    mutating func callAsFunction(_ name: String) -> HandlerEntry? {
        if let last, name == lastName { return last }
        let found = byName[name]
        lastName = name
        last = found
        return found
    }
}

extension EngineHost {
    /// Runs the gathered invocations and journals their results into the open
    /// transaction; the caller commits. No kill point falls between a handler's run and
    /// that commit: the journal write is part of finishing a handler.
    mutating func runDeferredInvocations() throws {
        guard !deferredInvocations.isEmpty else { return }
        if recoveredJournal == nil { recoveredJournal = Set(try store.journaledKeys()) }
        // One call, each invocation swapped into it in turn: building a call per
        // invocation copied the invocation (four references) each time.
        var call = HandlerCall(invocation: .vacant, now: now, wallClock: wallClock, formattedNow: stamps.text(at: now, wallClock))
        for index in deferredInvocations.indices {
            swap(&call.invocation, &deferredInvocations[index])
            let key = call.invocation.key
            if !recoveredJournal!.isEmpty, recoveredJournal!.remove(key) != nil, let journaled = try store.journaledOutcome(key) {
                pendingResults.append((key, journaled))
                continue
            }
            let handler = call.invocation.handler
            let outcome: HandlerOutcome
            if let entry = handlerLookup(handler) {
                outcome = entry.run(call)
            } else {
                outcome = .permanent("no handler named '\(handler)' is registered")
            }
            handlerRunCount += 1
            if recordsRuns { handlerRuns[key, default: 0] += 1 }
            if handler == "show_banner", case .success(let banner) = outcome { banners.append(banner) }
            try beginBatch()
            try store.journal(key, outcome)
            pendingResults.append((key, outcome))
        }
        deferredInvocations.removeAll(keepingCapacity: true)
    }
}
