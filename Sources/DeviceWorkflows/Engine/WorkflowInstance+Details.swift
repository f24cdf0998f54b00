public import LabKernel
import Orch8Wire

extension WorkflowInstance {
    /// The fields of an instance that rarely change, boxed so that copying an instance
    /// copies one reference for all of them. Copy on write: a change to a box another
    /// version shares goes to a fresh copy (`editDetails`).
    final class Details: @unchecked Sendable, Equatable {
        // Unchecked because the fields are `var`: they are only changed through
        // `editDetails`, which copies the box first unless this version is its only owner,
        // so no other version, on any thread, sees a change.
        var sequenceName: String
        var dedupKey: String?
        var error: String?
        var parent: ParentLink?
        var nodeErrors: [Int32: String]
        var forEachItems: [Int32: [JSONValue]]
        var skipSteps: Set<String>
        var pendingUpdate: PendingUpdate?

        init(sequenceName: String, dedupKey: String?, error: String?, parent: ParentLink?, nodeErrors: [Int32: String],
             forEachItems: [Int32: [JSONValue]], skipSteps: Set<String>, pendingUpdate: PendingUpdate?) {
            self.sequenceName = sequenceName
            self.dedupKey = dedupKey
            self.error = error
            self.parent = parent
            self.nodeErrors = nodeErrors
            self.forEachItems = forEachItems
            self.skipSteps = skipSteps
            self.pendingUpdate = pendingUpdate
        }

        func copy() -> Details {
            Details(sequenceName: sequenceName, dedupKey: dedupKey, error: error, parent: parent, nodeErrors: nodeErrors,
                    forEachItems: forEachItems, skipSteps: skipSteps, pendingUpdate: pendingUpdate)
        }

        static func == (a: Details, b: Details) -> Bool {
            a === b || (a.sequenceName == b.sequenceName && a.dedupKey == b.dedupKey && a.error == b.error
                && a.parent == b.parent && a.nodeErrors == b.nodeErrors && a.forEachItems == b.forEachItems
                && a.skipSteps == b.skipSteps && a.pendingUpdate == b.pendingUpdate)
        }
    }

    /// The details box, made this version's own first if another version shares it. The
    /// plain setters below write only a changed value: a snapshot shares the box, and
    /// finishing an instance set its `error` to nil, copying the box for nothing (one
    /// allocation per instance, and a box the snapshot no longer shared).
    mutating func editDetails() -> Details {
        if !isKnownUniquelyReferenced(&details) { details = details.copy() }
        return details
    }

    public var sequenceName: String {
        get { details.sequenceName }
        set { if newValue != details.sequenceName { editDetails().sequenceName = newValue } }
    }

    public var dedupKey: String? {
        get { details.dedupKey }
        set { if newValue != details.dedupKey { editDetails().dedupKey = newValue } }
    }

    public var error: String? {
        get { details.error }
        set { if newValue != details.error { editDetails().error = newValue } }
    }

    /// The instance and node of a parent running this one as a sub_sequence.
    public var parent: ParentLink? {
        get { details.parent }
        set { if newValue != details.parent { editDetails().parent = newValue } }
    }

    /// Why nodes failed, by node.
    public var nodeErrors: [Int32: String] {
        get { details.nodeErrors }
        _modify {
            let box = editDetails()
            yield &box.nodeErrors
        }
    }

    /// The items each for_each node iterates over (snapshotted when it starts).
    public var forEachItems: [Int32: [JSONValue]] {
        get { details.forEachItems }
        _modify {
            let box = editDetails()
            yield &box.forEachItems
        }
    }

    /// Steps that completed before an `update_sequence` (skip_executed, graceful): they
    /// complete at once instead of running again.
    public var skipSteps: Set<String> {
        get { details.skipSteps }
        _modify {
            let box = editDetails()
            yield &box.skipSteps
        }
    }

    /// A graceful update waiting for the current step to finish: the sequence to switch to.
    public var pendingUpdate: PendingUpdate? {
        get { details.pendingUpdate }
        set { if newValue != details.pendingUpdate { editDetails().pendingUpdate = newValue } }
    }
}
