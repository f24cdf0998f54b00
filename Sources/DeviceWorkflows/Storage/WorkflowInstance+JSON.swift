public import LabKernel

/// The stored form of an instance snapshot: one JSON document, compact and stable.
extension WorkflowInstance {
    public var json: JSONValue {
        var object: [String: JSONValue] = [
            "id": .string(id), "sequence_name": .string(sequenceName), "sequence_version": .number(Double(sequenceVersion)),
            "state": .string(state.rawValue), "data": .object(data), "created_ns": ns(createdAt), "updated_ns": ns(updatedAt),
            "seq": .string(String(sequenceNumber)), "steps": .number(Double(stepsExecuted)),
            "rng": .array(generator.state.map { .string(String($0)) }), "nodes": .array(nodes.map(\.json)),
        ]
        if let dedupKey { object["dedup_key"] = .string(dedupKey) }
        if let finishedAt { object["finished_ns"] = ns(finishedAt) }
        if let error { object["error"] = .string(error) }
        if cancelRequested { object["cancel_requested"] = true }
        if let parent { object["parent"] = ["instance": .string(parent.instanceID), "node": .number(Double(parent.node))] }
        return .object(object)
    }

    public init?(json: JSONValue) {
        guard let o = json.objectValue, let id = o["id"]?.stringValue, let name = o["sequence_name"]?.stringValue,
              let version = o["sequence_version"]?.numberValue, let state = o["state"]?.stringValue.flatMap(InstanceState.init),
              let data = o["data"]?.objectValue, let created = instant(o["created_ns"]), let updated = instant(o["updated_ns"]),
              let seq = o["seq"]?.stringValue.flatMap(UInt64.init), let steps = o["steps"]?.numberValue,
              let rng = o["rng"]?.arrayValue?.compactMap({ $0.stringValue.flatMap(UInt64.init) }),
              let generator = SeededGenerator(state: rng),
              let nodes = o["nodes"]?.arrayValue?.compactMap(ExecNode.init(json:)),
              nodes.count == o["nodes"]?.arrayValue?.count else { return nil }
        var parent: ParentLink?
        if let p = o["parent"]?.objectValue, let pid = p["instance"]?.stringValue, let node = p["node"]?.numberValue {
            parent = ParentLink(instanceID: pid, node: Int32(node))
        }
        self.init(id: id, sequenceName: name, sequenceVersion: Int(version), state: state, data: data, nodes: nodes,
                  dedupKey: o["dedup_key"]?.stringValue, createdAt: created, updatedAt: updated, finishedAt: instant(o["finished_ns"]),
                  sequenceNumber: seq, stepsExecuted: Int(steps), error: o["error"]?.stringValue,
                  cancelRequested: o["cancel_requested"]?.boolValue ?? false, parent: parent, generator: generator)
    }
}

extension ExecNode {
    /// `[kind, a, b, parent, state, cursor, attempt, children, extras]`: arrays keep a
    /// snapshot small; rarely set fields live in the `extras` object.
    var json: JSONValue {
        let (tag, a, b): (String, Int32, Int32)
        switch kind {
        case .block(let index): (tag, a, b) = ("b", index, 0)
        case .list(let owner, let list): (tag, a, b) = ("l", owner, list)
        }
        var extras: [String: JSONValue] = [:]
        if let startedAt { extras["s"] = ns(startedAt) }
        if let completedAt { extras["c"] = ns(completedAt) }
        if let retryAt { extras["r"] = ns(retryAt) }
        if let deadline { extras["d"] = ns(deadline) }
        if inFlight { extras["f"] = true }
        if gatePassed { extras["g"] = true }
        if let childInstance { extras["child"] = .string(childInstance) }
        if let items { extras["items"] = .array(items) }
        if let error { extras["e"] = .string(error) }
        return [.string(tag), .number(Double(a)), .number(Double(b)), .number(Double(parent)), .string(state.rawValue),
                .number(Double(cursor)), .number(Double(attempt)), .array(children.map { .number(Double($0)) }), .object(extras)]
    }

    init?(json: JSONValue) {
        guard let f = json.arrayValue, f.count == 9, let tag = f[0].stringValue, let a = f[1].numberValue, let b = f[2].numberValue,
              let parent = f[3].numberValue, let state = f[4].stringValue.flatMap(NodeState.init), let cursor = f[5].numberValue,
              let attempt = f[6].numberValue, let children = f[7].arrayValue, let extras = f[8].objectValue else { return nil }
        let kind: NodeKind = tag == "b" ? .block(Int32(a)) : .list(owner: Int32(a), list: Int32(b))
        self.init(kind: kind, parent: Int32(parent), state: state)
        self.cursor = Int32(cursor)
        self.attempt = Int16(attempt)
        self.children = children.compactMap { $0.numberValue.map { Int32($0) } }
        startedAt = instant(extras["s"])
        completedAt = instant(extras["c"])
        retryAt = instant(extras["r"])
        deadline = instant(extras["d"])
        inFlight = extras["f"]?.boolValue ?? false
        gatePassed = extras["g"]?.boolValue ?? false
        childInstance = extras["child"]?.stringValue
        items = extras["items"]?.arrayValue
        error = extras["e"]?.stringValue
    }
}

/// Instants as decimal strings: JSON numbers lose nanoseconds past 2^53.
private func ns(_ instant: Instant) -> JSONValue { .string(String(instant.nanoseconds)) }
private func instant(_ value: JSONValue?) -> Instant? { value?.stringValue.flatMap(Int64.init).map(Instant.init(nanoseconds:)) }
