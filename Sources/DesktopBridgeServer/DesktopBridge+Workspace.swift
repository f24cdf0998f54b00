public import DesktopBridgeWire
public import LabKernel

extension DesktopBridge {
    public static let maxFileBytes = 1 << 20
    public static let defaultOutputLimit = 64 * 1024

    /// `fs/read_text_file`, `fs/write_text_file` and `terminal/run`: checked here (params,
    /// the path inside the workspace as written), run by the driver (which also checks the
    /// real path, through symlinks), answered in `operationFinished`.
    mutating func workspaceCall(_ method: String, _ params: ACPParams, reply destination: ReplyTo, _ reply: inout DesktopReply) throws(RPCError) {
        let d = params.dialect
        let session = try params.sessionID
        let cwd = state.sessions[session]?.cwd ?? config.workspace
        let operation = nextOperation
        switch method {
        case "fs/read_text_file":
            let path = try self.path(params, cwd: cwd)
            let line = try params.optionalInt("line", in: 1...Int(Int32.max))
            let limit = try params.optionalInt("limit", in: 1...Int(Int32.max))
            operations[operation] = Pending(reply: destination, dialect: d, kind: .read)
            reply.operations.append(.readFile(operation: operation, path: path, line: line, limit: limit))
        case "fs/write_text_file":
            let path = try self.path(params, cwd: cwd)
            // ACP's `content`; the legacy app also sent `text` beside a `uri`.
            guard let content = params.value("content") ?? params.value("text"), case .string(let text) = content else {
                throw RPCError.invalidParams("'content' is required (a string)", field: "content")
            }
            guard text.utf8.count <= Self.maxFileBytes else { throw RPCError.invalidParams("a file is at most \(Self.maxFileBytes) bytes", field: "content") }
            operations[operation] = Pending(reply: destination, dialect: d, kind: .write)
            reply.operations.append(.writeFile(operation: operation, path: path, content: text))
        case "terminal/run":
            guard config.allowTerminal else {
                throw RPCError(code: RPCError.methodNotFoundCode, message: "terminal/run is disabled on this desktop (start it with --allow-terminal)")
            }
            guard case .array(let items)? = params.value("command"), !items.isEmpty, items.count <= 64,
                  case let argv = items.compactMap(\.stringValue), argv.count == items.count, !argv[0].isEmpty,
                  argv.allSatisfy({ $0.utf8.count <= 4_096 && !$0.contains("\0") }) else {
                throw RPCError.invalidParams("'command' is a list of 1 to 64 strings, the program first", field: "command")
            }
            var directory = cwd
            if let asked = try params.optionalString("cwd") {
                guard let resolved = WorkspacePath.resolve(asked, root: config.workspace, cwd: cwd) else {
                    throw RPCError.invalidParams("'cwd' must be inside the workspace", field: "cwd")
                }
                directory = resolved
            }
            let limit = try params.optionalInt("outputByteLimit", in: 1...Self.maxFileBytes) ?? Self.defaultOutputLimit
            operations[operation] = Pending(reply: destination, dialect: d, kind: .terminal)
            reply.operations.append(.runTerminal(operation: operation, argv: argv, cwd: directory, outputLimit: limit, timeout: config.terminalTimeout))
        default:
            throw RPCError.methodNotFound(method)
        }
        nextOperation += 1
    }

    /// The params' `path` (or the legacy `uri`, `file://…`), resolved inside the workspace.
    func path(_ params: ACPParams, cwd: String) throws(RPCError) -> String {
        var asked = try params.optionalString("path")
        if asked == nil, let uri = try params.optionalString("uri") {
            guard uri.hasPrefix("file://") else { throw RPCError.invalidParams("'uri' must be a file:// URI", field: "uri") }
            asked = String(uri.dropFirst("file://".count)).removingPercentEncoding
        }
        guard let asked else { throw RPCError.invalidParams("'path' is required", field: "path") }
        guard let resolved = WorkspacePath.resolve(asked, root: config.workspace, cwd: cwd) else {
            throw RPCError.invalidParams("'path' must be inside the workspace \(config.workspace)", field: "path")
        }
        return resolved
    }

    /// What a driver's operation came to.
    public enum OperationResult: Sendable, Equatable {
        case read(String)
        case written
        case terminal(output: String, truncated: Bool, exitStatus: Int32?)
    }

    /// The driver finished operation `operation` (or failed it with a JSON-RPC error).
    public mutating func operationFinished(_ operation: Int, _ result: Result<OperationResult, RPCError>, now: Instant) -> DesktopReply {
        var reply = DesktopReply()
        guard let pending = operations.removeValue(forKey: operation) else { return reply }
        let id = Self.id(of: pending.reply)
        let d = pending.dialect
        switch result {
        case .failure(let error): answer(pending.reply, .failure(id: id, error: error), &reply)
        case .success(.read(let content)): answer(pending.reply, .response(id: id, result: ["content": .string(content)]), &reply)
        case .success(.written): answer(pending.reply, .response(id: id, result: d == .legacy ? ["_meta": .null] : .object([:])), &reply)
        case .success(.terminal(let output, let truncated, let status)):
            // exitStatus is null for a program stopped at its deadline or output cap.
            let fields: [String: JSONValue] = ["output": .string(output), "truncated": .bool(truncated),
                                               "exitStatus": status.map { .number(Double($0)) } ?? .null]
            answer(pending.reply, .response(id: id, result: d.object(fields)), &reply)
        }
        return reply
    }
}

/// Paths confined to the workspace, as written: `..` cannot climb out, relative paths
/// start at the session's directory. (Symlinks are the driver's to check: only the real
/// filesystem knows where one points.)
public enum WorkspacePath {
    public static func resolve(_ path: String, root: String, cwd: String) -> String? {
        guard !path.isEmpty, path.utf8.count <= 4_096, !path.contains("\0") else { return nil }
        let absolute = path.hasPrefix("/") ? path : cwd + "/" + path
        var parts: [Substring] = []
        for part in absolute.split(separator: "/") {
            switch part {
            case ".": continue
            case "..":
                guard !parts.isEmpty else { return nil }
                parts.removeLast()
            default: parts.append(part)
            }
        }
        let resolved = "/" + parts.joined(separator: "/")
        let top = root.count > 1 && root.hasSuffix("/") ? String(root.dropLast()) : root
        guard resolved == top || top == "/" || resolved.hasPrefix(top + "/") else { return nil }
        return resolved
    }

    /// Whether `real` (a path with its symlinks resolved) is inside `root` (resolved too).
    public static func contains(root: String, real: String) -> Bool {
        let top = root.count > 1 && root.hasSuffix("/") ? String(root.dropLast()) : root
        return real == top || top == "/" || real.hasPrefix(top + "/")
    }
}

extension String {
    /// `%XX` sequences decoded (a `file://` URI's path), or nil when one is malformed.
    var removingPercentEncoding: String? {
        var bytes: [UInt8] = []
        var iterator = utf8.makeIterator()
        while let byte = iterator.next() {
            guard byte == UInt8(ascii: "%") else { bytes.append(byte); continue }
            guard let high = iterator.next().flatMap(Self.hexValue), let low = iterator.next().flatMap(Self.hexValue) else { return nil }
            bytes.append(high << 4 | low)
        }
        return String(validating: bytes, as: UTF8.self)
    }

    static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
