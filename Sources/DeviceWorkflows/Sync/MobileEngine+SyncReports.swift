public import LabKernel
public import Orch8Wire

extension MobileEngine {
    /// The status the reporter sends for an instance (wire-notes §a StatusUpdate): state in
    /// PascalCase, the current step and its handler (nested steps included, where the
    /// SDK only finds top-level ones), the step timeline.
    public func statusUpdate(of instanceID: InstanceID, now: Instant) -> StatusUpdate? {
        guard let index = indexByID[instanceID] else { return nil }
        let instance = instances[index]
        let current = currentStep(of: index)
        var handler: String?
        if let current, let blockIndex = programOf[index].indexByID[current], let step = programOf[index].steps[Int(blockIndex)] {
            handler = step.handler
        }
        let steps = timeline(at: index).map(\.json)
        return StatusUpdate(instanceID: instance.id, sequenceName: instance.sequenceName, state: instance.state.rawValue,
                            currentStep: current, handler: handler, timestamp: wallClock.rfc3339(at: now), steps: .array(steps))
    }

    /// The approval request for a waiting step.
    public func approvalRequest(instanceID: String, step: String) -> ApprovalRequest? {
        guard let index = index(of: instanceID), let blockIndex = programOf[index].indexByID[step],
              let spec = programOf[index].steps[Int(blockIndex)], let wait = spec.wait else { return nil }
        let choices = wait.choices.map { list in JSONValue.array(list.map { ["label": .string($0.label), "value": .string($0.value)] }) }
        return ApprovalRequest(instanceID: instanceID, blockID: step, sequenceName: instances[index].sequenceName, prompt: wait.prompt,
                               choices: choices, storeAs: wait.storeAs, timeoutSeconds: wait.timeout.map { Int($0.nanoseconds / 1_000_000_000) })
    }

    /// A delegated step waits for the server's `step_result`, not for a handler's
    /// timeout: the round trip takes a sync cycle or more.
    public mutating func holdForDelegation(_ key: InvocationKey) {
        guard let index = indexByNumber[key.instance], Int(key.node) < instances[index].nodes.count else { return }
        instances[index].nodes[Int(key.node)].deadline = nil
    }
}
