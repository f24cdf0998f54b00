import Foundation
public import DesktopBridgeServer
import DesktopBridgeWire
public import Hummingbird
import HummingbirdCore
import HummingbirdWebSocket
public import LabKernel
public import NIOCore
import NIOWebSocket
import ServerStorage
public import ServiceLifecycle

/// The desktop bridge on a real port (`ws://127.0.0.1:9099`, as the seed's macOS app):
/// the `DesktopBridge` core behind a Hummingbird WebSocket, history in
/// `<data>/desktop-bridge.sqlite`, files and terminals in the workspace directory, agent
/// programs as child processes.
///
/// Frames, timers, operation results and program output run through the core one at a
/// time (under a lock); what a call changed is committed before any frame goes out. File
/// operations are checked twice: the core confines the path as written, and this driver
/// resolves symlinks (`realpath`) and refuses a real path outside the workspace. Nothing
/// here logs a frame, a prompt or a file.
public final class DesktopBridgeLiveServer: ReferenceServer, @unchecked Sendable {
    public let name = "desktop-bridge"
    public let defaultPort: Int
    public let summary = "desktop bridge: JSON-RPC 2.0 over WebSocket with ACP methods (0.2 snake_case or current camelCase)"
    public var scheme: String { "ws" }
    let lock = NSLock()
    var bridge: DesktopBridge
    let store: SQLiteDesktopStore
    let clock = LiveClock()
    var writers: [Int: AsyncStream<SocketCommand>.Continuation] = [:]
    var programs: [Int: LineProcess] = [:]
    /// Deadlines a sleeping task already waits for.
    var armed: Set<Instant> = []
    let backend = CommandBackend()
    /// Reads and writes of workspace files, one at a time in the order the core started
    /// them: a phone that writes a file and then reads it reads what it wrote (on a
    /// concurrent queue the read could run first).
    let files = DispatchQueue(label: "fleetlab.desktop-bridge.files")
    /// The workspace with its symlinks resolved.
    public let workspace: String

    public init(dataDirectory: String, workspace: String? = nil, defaultPort: Int = 9099, allowTerminal: Bool = false,
                agents: [String: [String]] = [:], seed: UInt64? = nil, configure: (inout DesktopConfig) -> Void = { _ in }) throws {
        self.defaultPort = defaultPort
        try FileManager.default.createDirectory(atPath: dataDirectory, withIntermediateDirectories: true)
        let root = workspace ?? (dataDirectory as NSString).appendingPathComponent("workspace")
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        guard let real = Self.realPath(root) else { throw DesktopServerError.workspace(root) }
        self.workspace = real
        store = try SQLiteDesktopStore(path: (dataDirectory as NSString).appendingPathComponent("desktop-bridge.sqlite"))
        var config = DesktopConfig()
        config.workspace = real
        config.allowTerminal = allowTerminal
        for index in config.modes.indices {
            if let argv = agents[config.modes[index].id] { config.modes[index].provider = .program(argv) }
        }
        configure(&config)
        bridge = DesktopBridge(state: try store.load(), config: config, seed: StreamSeed(seed ?? UInt64.random(in: 1...UInt64.max)),
                               wallClock: clock.origin)
    }

    public var details: [String] {
        lock.withLock {
            let modes = bridge.config.modes.map { mode -> String in
                switch mode.provider {
                case .scripted: return "\(mode.id) (scripted)"
                case .program(let argv): return "\(mode.id) (\(argv[0]))"
                case .unavailable: return "\(mode.id) (not installed)"
                }
            }
            return ["workspace: \(workspace)  terminal/run: \(bridge.config.allowTerminal ? "allowed" : "off")",
                    "modes: \(modes.joined(separator: ", "))"]
        }
    }

    var now: Instant { clock.now }

    static func realPath(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// Commits a reply's changes, then sends its frames, starts its operations and arms
    /// the core's next timer (called under the lock). A failed commit reloads the state
    /// from disk, and nothing of the reply goes out.
    func carryOut(_ reply: DesktopReply) {
        do {
            try store.apply(reply.changes)
        } catch {
            if let state = try? store.load() { bridge.state = state }
            return
        }
        for case .send(let connection, let text) in reply.outputs { writers[connection]?.yield(.text(text)) }
        for operation in reply.operations { start(operation) }
        if let deadline = bridge.nextDeadline { arm(deadline) }
    }

    func arm(_ deadline: Instant) {
        guard armed.insert(deadline).inserted else { return }
        let delay = max(0, (deadline - now).nanoseconds)
        Task { [self] in
            try? await Task.sleep(nanoseconds: UInt64(delay))
            lock.withLock {
                armed.remove(deadline)
                carryOut(bridge.expire(now: max(now, deadline)))
            }
        }
    }

    func finished(_ operation: Int, _ result: Result<DesktopBridge.OperationResult, RPCError>) {
        lock.withLock { carryOut(bridge.operationFinished(operation, result, now: now)) }
    }

    func start(_ operation: DesktopOperation) {
        switch operation {
        case .readFile(let id, let path, let line, let limit):
            files.async { [self] in finished(id, Self.read(path, root: workspace, line: line, limit: limit)) }
        case .writeFile(let id, let path, let content):
            files.async { [self] in finished(id, Self.write(path, content: content, root: workspace)) }
        case .runTerminal(let id, let argv, let cwd, let limit, let timeout):
            guard let real = Self.realPath(cwd), WorkspacePath.contains(root: workspace, real: real) else {
                finished(id, .failure(.invalidParams("'cwd' must be a directory inside the workspace", field: "cwd")))
                return
            }
            let collected = TerminalOutput(limit: limit)
            let running = backend.run(argv: argv, input: "", timeout: timeout, directory: real) { [self] event in
                switch event {
                case .output(let text): collected.append(text)
                case .finished(let status, let reason):
                    if status == -1 { finished(id, .failure(.invalidParams(reason ?? "the program could not be started", field: "command"))); return }
                    let (output, truncated) = collected.result
                    // A program stopped at the cap or the deadline did not exit on its own.
                    let stopped = truncated || reason != nil
                    finished(id, .success(.terminal(output: output, truncated: stopped, exitStatus: stopped ? nil : status)))
                }
            }
            collected.whenFull(running.stop)
        case .startProgram(let run, let argv, let cwd):
            programs[run] = LineProcess(argv: argv, directory: cwd) { [self] event in
                lock.withLock {
                    switch event {
                    case .line(let line): carryOut(bridge.agentOutput(run: run, line: line, now: now))
                    case .exited(let status):
                        programs[run] = nil
                        carryOut(bridge.agentExited(run: run, status: status, now: now))
                    }
                }
            }
        case .programInput(let run, let line): programs[run]?.write(line)
        case .stopProgram(let run): programs.removeValue(forKey: run)?.stop()
        }
    }

    /// Reads a UTF-8 file whose real path is inside the workspace, from `line` (1-based)
    /// for `limit` lines.
    static func read(_ path: String, root: String, line: Int?, limit: Int?) -> Result<DesktopBridge.OperationResult, RPCError> {
        guard let real = realPath(path) else { return .failure(.notFound("no file \(path)")) }
        guard WorkspacePath.contains(root: root, real: real) else { return .failure(.invalidParams("'path' leads outside the workspace", field: "path")) }
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: real, isDirectory: &isDirectory), !isDirectory.boolValue else {
            return .failure(.invalidParams("'path' is a directory", field: "path"))
        }
        let size = (try? FileManager.default.attributesOfItem(atPath: real)[.size] as? Int) ?? 0
        guard size <= DesktopBridge.maxFileBytes else { return .failure(.invalidParams("the file is over \(DesktopBridge.maxFileBytes) bytes", field: "path")) }
        guard let data = FileManager.default.contents(atPath: real), let text = String(validating: [UInt8](data), as: UTF8.self) else {
            return .failure(.invalidParams("not a UTF-8 text file", field: "path"))
        }
        guard line != nil || limit != nil else { return .success(.read(text)) }
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        let first = min(max((line ?? 1) - 1, 0), lines.count)
        let last = min(first + (limit ?? lines.count), lines.count)
        return .success(.read(lines[first..<last].joined(separator: "\n")))
    }

    /// Writes a file whose directory's real path is inside the workspace (atomically: a
    /// symlink at the path is replaced, never followed).
    static func write(_ path: String, content: String, root: String) -> Result<DesktopBridge.OperationResult, RPCError> {
        let directory = (path as NSString).deletingLastPathComponent
        guard let real = realPath(directory) else { return .failure(.notFound("no directory \(directory)")) }
        guard WorkspacePath.contains(root: root, real: real) else { return .failure(.invalidParams("'path' leads outside the workspace", field: "path")) }
        let target = (real as NSString).appendingPathComponent((path as NSString).lastPathComponent)
        do {
            try Data(content.utf8).write(to: URL(fileURLWithPath: target), options: .atomic)
            return .success(.written)
        } catch {
            return .failure(.internalError("the file could not be written"))
        }
    }

    /// One phone: the core gets its frames; a writer drains what the core sends it.
    func session(inbound: WebSocketInboundStream, outbound: WebSocketOutboundWriter) async {
        let (stream, continuation) = AsyncStream<SocketCommand>.makeStream()
        let id = lock.withLock {
            let id = bridge.connect()
            writers[id] = continuation
            return id
        }
        await runSocket(inbound: inbound, outbound: outbound, commands: stream, closer: continuation, maxMessage: RPCFrame.maxBytes) { [self] text in
            lock.withLock { carryOut(bridge.receive(id, text: text, now: now)) }
        } ended: {
            lock.withLock {
                bridge.disconnect(id)
                writers[id]?.finish()
                writers[id] = nil
            }
        }
    }

    public func makeService(configuration: ApplicationConfiguration, transport: ServerTransport,
                            onRunning: @escaping @Sendable (any Channel) async -> Void) throws -> any Service {
        let responder = CoreResponder(maxBodyBytes: 1_024) { request in
            .json(426, ["error": "upgrade_required", "message": "this is a WebSocket endpoint: connect with ws:// and send JSON-RPC initialize"],
                  headers: [HTTPHeader("Upgrade", "websocket")])
        }
        let socketConfiguration = HTTP1WebSocketUpgradeChannel.Configuration(
            ws: WebSocketServerConfiguration(maxFrameSize: RPCFrame.maxBytes, closeTimeout: .seconds(2)))
        let upgrade = try transport.http1WebSocketUpgrade(configuration: socketConfiguration) { _, _, _ in
            .upgrade([:]) { [self] inbound, outbound, _ in await self.session(inbound: inbound, outbound: outbound) }
        }
        return Application(responder: responder, server: upgrade, configuration: configuration) { channel in await onRunning(channel) }
    }
}

enum DesktopServerError: Error, CustomStringConvertible {
    case workspace(String)

    var description: String {
        switch self {
        case .workspace(let path): return "the workspace \(path) cannot be opened"
        }
    }
}

/// A terminal run's output, kept up to its byte limit. A program that writes past the
/// limit is stopped there (`yes` would otherwise burn a core until its deadline).
final class TerminalOutput: @unchecked Sendable {
    private let lock = NSLock()
    private var bytes: [UInt8] = []
    private var truncated = false
    private var stop: (@Sendable () -> Void)?
    let limit: Int

    init(limit: Int) { self.limit = limit }

    func append(_ text: String) {
        let stopNow: (@Sendable () -> Void)? = lock.withLock {
            let room = limit - bytes.count
            let piece = Array(text.utf8)
            bytes += piece.prefix(max(0, room))
            guard piece.count > room, !truncated else { return nil }
            truncated = true
            return stop
        }
        stopNow?()
    }

    /// Runs `stop` once the output is over the limit (at once if it already is).
    func whenFull(_ stop: @escaping @Sendable () -> Void) {
        let full = lock.withLock {
            self.stop = stop
            return truncated
        }
        if full { stop() }
    }

    var result: (String, Bool) { lock.withLock { (String(decoding: bytes, as: UTF8.self), truncated) } }
}
