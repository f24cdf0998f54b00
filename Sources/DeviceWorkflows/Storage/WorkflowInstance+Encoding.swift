public import LabKernel
import Orch8Wire

/// The stored form of an instance snapshot: one JSON document, compact and stable.
extension WorkflowInstance {
    /// Everything but the context and the tree, as one JSON object (the store's `meta`
    /// column), written field by field: the device store writes it per changed instance
    /// per tick.
    package func writeMeta(into meta: inout JSONObjectWriter) {
        meta.member("id", string: id)
        meta.member("sequence_name", string: sequenceName)
        meta.member("sequence_version", integer: sequenceVersion)
        meta.member("state", string: state.rawValue)
        meta.member("created_ns", exact: createdAt.nanoseconds)
        meta.member("updated_ns", exact: updatedAt.nanoseconds)
        meta.member("seq", exact: sequenceNumber)
        meta.member("steps", integer: stepsExecuted)
        meta.member("rng", exactList: generator.state)
        if let dedupKey { meta.member("dedup_key", string: dedupKey) }
        if let finishedAt { meta.member("finished_ns", exact: finishedAt.nanoseconds) }
        if let error { meta.member("error", string: error) }
        if cancelRequested { meta.member("cancel_requested", true) }
        if let parent { meta.member("parent", ["instance": .string(String(parent.instance)), "node": .number(Double(parent.node))]) }
        if !nodeErrors.isEmpty {
            meta.member("node_errors", .object(Dictionary(uniqueKeysWithValues: nodeErrors.map { (String($0.key), JSONValue.string($0.value)) })))
        }
        if !forEachItems.isEmpty {
            meta.member("for_each_items", .object(Dictionary(uniqueKeysWithValues: forEachItems.map { (String($0.key), JSONValue.array($0.value)) })))
        }
        if !skipSteps.isEmpty { meta.member("skip_steps", .array(skipSteps.sorted().map(JSONValue.string))) }
        if let pendingUpdate {
            meta.member("pending_update", ["sequence": .string(pendingUpdate.sequenceName), "version": .number(Double(pendingUpdate.version))])
        }
    }

    /// The `meta` fields as a dictionary (tools and tests; the store writes them directly).
    var metaJSON: [String: JSONValue] {
        var writer = JSONObjectWriter()
        writeMeta(into: &writer)
        let bytes = writer.finish()
        return (try? JSONValue.parse(bytes: bytes))?.objectValue ?? [:]
    }

    /// The whole instance as one JSON document (snapshots in tests and tools).
    public var json: JSONValue {
        var object = metaJSON
        object["data"] = data.json
        object["nodes"] = .array(nodes.map(\.json))
        return .object(object)
    }

    public init?(json: JSONValue) {
        guard let o = json.objectValue, let id = o["id"]?.stringValue.flatMap(InstanceID.init), let name = o["sequence_name"]?.stringValue,
              let version = o["sequence_version"]?.numberValue, let state = o["state"]?.stringValue.flatMap(InstanceState.init),
              let data = o["data"]?.objectValue, let created = instant(o["created_ns"]), let updated = instant(o["updated_ns"]),
              let seq = o["seq"]?.stringValue.flatMap(UInt64.init), let steps = o["steps"]?.numberValue,
              let rng = o["rng"]?.arrayValue?.compactMap({ $0.stringValue.flatMap(UInt64.init) }),
              let generator = SeededGenerator(state: rng),
              let nodes = o["nodes"]?.arrayValue?.compactMap(ExecNode.init(json:)),
              nodes.count == o["nodes"]?.arrayValue?.count else { return nil }
        var parent: ParentLink?
        if let p = o["parent"]?.objectValue, let number = p["instance"]?.stringValue.flatMap(UInt64.init), let node = p["node"]?.numberValue {
            parent = ParentLink(instance: number, node: Int32(node))
        }
        self.init(id: id, sequenceName: name, sequenceVersion: Int(version), state: state, data: ContextData(data), nodes: nodes,
                  dedupKey: o["dedup_key"]?.stringValue, createdAt: created, updatedAt: updated, finishedAt: instant(o["finished_ns"]),
                  sequenceNumber: seq, stepsExecuted: Int(steps), error: o["error"]?.stringValue,
                  cancelRequested: o["cancel_requested"]?.boolValue ?? false, parent: parent, generator: generator)
        for (key, value) in o["node_errors"]?.objectValue ?? [:] {
            if let n = Int32(key), let text = value.stringValue { nodeErrors[n] = text }
        }
        for (key, value) in o["for_each_items"]?.objectValue ?? [:] {
            if let n = Int32(key), let items = value.arrayValue { forEachItems[n] = items }
        }
        skipSteps = Set(o["skip_steps"]?.arrayValue?.compactMap(\.stringValue) ?? [])
        if let update = o["pending_update"], let name = update["sequence"]?.stringValue, let version = update["version"]?.numberValue {
            pendingUpdate = PendingUpdate(sequenceName: name, version: Int(version))
        }
    }
}

/// The execution tree in binary: the device store writes it for every changed instance
/// on every tick, so it is a fixed little-endian layout rather than JSON. Per node:
/// kind (u8: 0 block, 1 list), a (i32), b (i32), parent (i32), state (u8), cursor (i32),
/// firstChild, lastChild, nextSibling, childCount (i32 each), attempt (i16), flags (u8:
/// 1 inFlight, 2 gatePassed, 4 startedAt, 8 completedAt, 16 retryAt, 32 deadline,
/// 64 childInstance), then the present optional fields as i64 in that order.
/// Preceded by a version byte (1) and the node count (u32).
package enum TreeCodec {
    static let states: [NodeState] = [.pending, .running, .waiting, .completed, .failed, .cancelled, .skipped]

    package static func encode(_ nodes: [ExecNode]) -> [UInt8] {
        var out: [UInt8] = []
        encode(nodes, into: &out)
        return out
    }

    /// The most bytes a node takes (every optional field present).
    static let maxNodeBytes = 1 + 4 * 3 + 1 + 4 * 5 + 2 + 1 + 8 * 5

    /// Encodes into `out`, replacing its contents (the store reuses one buffer). The
    /// buffer is sized for the worst case, written through a pointer, then cut to length:
    /// appending field by field cost more than the rest of the encoding.
    package static func encode(_ nodes: [ExecNode], into out: inout [UInt8]) {
        let capacity = 5 + nodes.count * maxNodeBytes
        out.removeAll(keepingCapacity: true)
        out.append(contentsOf: repeatElement(0, count: capacity))
        let written = out.withUnsafeMutableBytes { raw in
            var writer = ByteWriter(base: raw.baseAddress!)
            writer.put(UInt8(1))
            writer.put(UInt32(nodes.count))
            for node in nodes {
                switch node.kind {
                case .block(let b):
                    writer.put(UInt8(0))
                    writer.put(UInt32(bitPattern: b))
                    writer.put(UInt32(0))
                case .list(let owner, let list):
                    writer.put(UInt8(1))
                    writer.put(UInt32(bitPattern: owner))
                    writer.put(UInt32(bitPattern: list))
                }
                writer.put(UInt32(bitPattern: node.parent))
                writer.put(stateCode(node.state))
                writer.put(UInt32(bitPattern: node.cursor))
                writer.put(UInt32(bitPattern: node.firstChild))
                writer.put(UInt32(bitPattern: node.lastChild))
                writer.put(UInt32(bitPattern: node.nextSibling))
                writer.put(UInt32(bitPattern: node.childCount))
                writer.put(UInt16(bitPattern: node.attempt))
                var flags: UInt8 = (node.inFlight ? 1 : 0) | (node.gatePassed ? 2 : 0)
                if node.startedAt != nil { flags |= 4 }
                if node.completedAt != nil { flags |= 8 }
                if node.retryAt != nil { flags |= 16 }
                if node.deadline != nil { flags |= 32 }
                if node.childInstance != nil { flags |= 64 }
                writer.put(flags)
                if let t = node.startedAt { writer.put(UInt64(bitPattern: t.nanoseconds)) }
                if let t = node.completedAt { writer.put(UInt64(bitPattern: t.nanoseconds)) }
                if let t = node.retryAt { writer.put(UInt64(bitPattern: t.nanoseconds)) }
                if let t = node.deadline { writer.put(UInt64(bitPattern: t.nanoseconds)) }
                if let child = node.childInstance { writer.put(child) }
            }
            return writer.offset
        }
        out.removeLast(capacity - written)
    }

    /// Little-endian fields at a moving offset into memory the caller has sized.
    struct ByteWriter {
        let base: UnsafeMutableRawPointer
        var offset = 0
        mutating func put<T: FixedWidthInteger>(_ value: T) {
            base.storeBytes(of: value.littleEndian, toByteOffset: offset, as: T.self)
            offset += MemoryLayout<T>.size
        }
    }

    /// The index of `state` in `states`.
    static func stateCode(_ state: NodeState) -> UInt8 {
        switch state {
        case .pending: return 0
        case .running: return 1
        case .waiting: return 2
        case .completed: return 3
        case .failed: return 4
        case .cancelled: return 5
        case .skipped: return 6
        }
    }

    package static func decode(_ bytes: [UInt8]) -> [ExecNode]? {
        var reader = Reader(bytes: bytes)
        guard reader.u8() == 1, let count = reader.u32() else { return nil }
        var nodes: [ExecNode] = []
        nodes.reserveCapacity(Int(count))
        for _ in 0..<count {
            guard let tag = reader.u8(), let a = reader.i32(), let b = reader.i32(), let parent = reader.i32(),
                  let state = reader.u8(), Int(state) < states.count else { return nil }
            var node = ExecNode(kind: tag == 0 ? .block(a) : .list(owner: a, list: b), parent: parent, state: states[Int(state)])
            guard let cursor = reader.i32(), let first = reader.i32(), let last = reader.i32(), let next = reader.i32(),
                  let childCount = reader.i32(), let attempt = reader.u16(), let flags = reader.u8() else { return nil }
            (node.cursor, node.firstChild, node.lastChild, node.nextSibling, node.childCount) = (cursor, first, last, next, childCount)
            node.attempt = Int16(bitPattern: attempt)
            node.inFlight = flags & 1 != 0
            node.gatePassed = flags & 2 != 0
            var values: [Int64?] = []
            for bit in 0..<5 {
                if flags & (4 << UInt8(bit)) != 0 {
                    guard let v = reader.u64() else { return nil }
                    values.append(Int64(bitPattern: v))
                } else {
                    values.append(nil)
                }
            }
            node.startedAt = values[0].map(Instant.init(nanoseconds:))
            node.completedAt = values[1].map(Instant.init(nanoseconds:))
            node.retryAt = values[2].map(Instant.init(nanoseconds:))
            node.deadline = values[3].map(Instant.init(nanoseconds:))
            node.childInstance = values[4].map { UInt64(bitPattern: $0) }
            nodes.append(node)
        }
        return reader.offset == bytes.count ? nodes : nil
    }

    struct Reader {
        let bytes: [UInt8]
        var offset = 0
        mutating func take<T: FixedWidthInteger>(_: T.Type) -> T? {
            let size = MemoryLayout<T>.size
            guard offset + size <= bytes.count else { return nil }
            var value: T = 0
            for i in 0..<size { value |= T(bytes[offset + i]) << (8 * i) }
            offset += size
            return value
        }
        mutating func u8() -> UInt8? { take(UInt8.self) }
        mutating func u16() -> UInt16? { take(UInt16.self) }
        mutating func u32() -> UInt32? { take(UInt32.self) }
        mutating func u64() -> UInt64? { take(UInt64.self) }
        mutating func i32() -> Int32? { u32().map { Int32(bitPattern: $0) } }
    }
}

extension ExecNode {
    /// `[kind, a, b, parent, state, cursor, attempt, [first, last, next, count], extras]`:
    /// arrays keep a snapshot small; rarely set fields live in the `extras` object.
    package var json: JSONValue {
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
        if let childInstance { extras["child"] = .string(String(childInstance)) }
        let links: JSONValue = [.number(Double(firstChild)), .number(Double(lastChild)), .number(Double(nextSibling)), .number(Double(childCount))]
        return [.string(tag), .number(Double(a)), .number(Double(b)), .number(Double(parent)), .string(state.rawValue),
                .number(Double(cursor)), .number(Double(attempt)), links, .object(extras)]
    }

    init?(json: JSONValue) {
        guard let f = json.arrayValue, f.count == 9, let tag = f[0].stringValue, let a = f[1].numberValue, let b = f[2].numberValue,
              let parent = f[3].numberValue, let state = f[4].stringValue.flatMap(NodeState.init), let cursor = f[5].numberValue,
              let attempt = f[6].numberValue, let links = f[7].arrayValue?.compactMap(\.numberValue), links.count == 4,
              let extras = f[8].objectValue else { return nil }
        let kind: NodeKind = tag == "b" ? .block(Int32(a)) : .list(owner: Int32(a), list: Int32(b))
        self.init(kind: kind, parent: Int32(parent), state: state)
        self.cursor = Int32(cursor)
        self.attempt = Int16(attempt)
        (firstChild, lastChild, nextSibling, childCount) = (Int32(links[0]), Int32(links[1]), Int32(links[2]), Int32(links[3]))
        startedAt = instant(extras["s"])
        completedAt = instant(extras["c"])
        retryAt = instant(extras["r"])
        deadline = instant(extras["d"])
        inFlight = extras["f"]?.boolValue ?? false
        gatePassed = extras["g"]?.boolValue ?? false
        childInstance = extras["child"]?.stringValue.flatMap(UInt64.init)
    }
}

/// Instants as decimal strings: JSON numbers lose nanoseconds past 2^53.
private func ns(_ instant: Instant) -> JSONValue { .string(String(instant.nanoseconds)) }
private func instant(_ value: JSONValue?) -> Instant? { value?.stringValue.flatMap(Int64.init).map(Instant.init(nanoseconds:)) }
