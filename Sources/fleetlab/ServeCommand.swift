import ArgumentParser
import Foundation
import LabCrypto
import LabKernel
import Live
import AgentRuntimeWire
import DesktopBridgeServer
import SecureChatServer
import Simulator
import Synchronization

struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Run the reference servers for real on 127.0.0.1 until Ctrl-C.",
        discussion: """
        Each server listens on its own port and runs in a worker process of its own: a \
        server that crashes is restarted (on the same port, over the same data) while the \
        others go on. Ports: --port NAME=PORT (repeatable), e.g. --port host=9000. A taken \
        port is reported before anything starts (exit status 2).

        --faults FILE plays server crashes, slowdowns and errors on the wall clock, as a \
        scenario's `faults:` list writes them; saving FILE again plays its new plan from \
        that moment (docs/live.md, "Faults").

        --tls-cert FILE --tls-key FILE serves every port over TLS (https://, wss://).

        SIGINT and SIGTERM stop every server gracefully.
        """)

    @Option(help: "Address to bind (default 127.0.0.1; use 0.0.0.0 to expose on the network).")
    var host = "127.0.0.1"

    @Option(help: "The host name or address phones reach this machine at, printed and handed out in discovery documents, manifests and pairing answers (default: the bound address; with 0.0.0.0, the address of this machine's default route).")
    var advertise: String?

    @Option(name: .customLong("port"), help: "A server's port as NAME=PORT (host=7700 by default).")
    var ports: [String] = []

    @Option(help: "Directory for the servers' SQLite files.")
    var data = ".fleetlab-data"

    @Flag(name: .customLong("no-auth"), help: "Accept every request without an API key (local development).")
    var noAuth = false

    @Flag(name: .customLong("chat-legacy-plaintext"),
          help: "Let chat groups be created on d3chat's legacy plaintext protocol (\"legacy_plaintext\": true); off, every channel is ciphertext only.")
    var chatLegacyPlaintext = false

    @Option(name: .customLong("chat-auth-per-minute"),
            help: "Sign-ups, logins and refreshes the chat server takes per client address per minute (default 60, as d3chat; a load test registering many phones from one address needs more).")
    var chatAuthPerMinute = 60

    @Option(name: .customLong("agent-workflows"), help: "Folder of the agent runtime's workflow files (YAML or JSON).")
    var agentWorkflows = AgentWorkflowFiles.defaultDirectory

    @Option(name: .customLong("without"), help: "Skip a server by name (repeatable), e.g. --without agent-runtime.")
    var without: [String] = []

    @Option(name: .customLong("workspace"), help: "The desktop bridge's workspace: files and terminals are confined to it (default <data>/workspace).")
    var workspace: String?

    @Flag(name: .customLong("allow-terminal"), help: "Let phones run programs in the workspace with terminal/run (off by default).")
    var allowTerminal = false

    @Option(name: .customLong("desktop-agent"),
            help: "An agent program speaking ACP on stdio for a desktop bridge mode, as MODE=COMMAND (repeatable), e.g. --desktop-agent 'claude-code=claude-code-acp'.")
    var desktopAgents: [String] = []

    @Option(name: .customLong("faults"),
            help: "A fault plan (or a scenario) whose server-crash, server-slowdown and server-errors faults the servers play, counted from the start, or from when the file is saved again (it is re-read then).")
    var faultsFile: String?

    @Option(name: .customLong("tls-cert"), help: "Serve every port over TLS (https://, wss://) with this PEM certificate chain, leaf first (e.g. one mkcert made), for apps on real phones.")
    var tlsCert: String?

    @Option(name: .customLong("tls-key"), help: "The PEM private key of --tls-cert.")
    var tlsKey: String?

    @Option(name: .customLong("header-timeout"),
            help: "How long a new connection may take to send its first request head before it is answered 408 and closed (default 30s).")
    var headerTimeout: DurationArgument = DurationArgument(span: .seconds(30))

    @Option(name: .customLong("idle-timeout"),
            help: "How long a keep-alive connection may wait for its next request (or a body for its next bytes) before it is closed (default 75s, as nginx); streams and WebSockets are not idle.")
    var idleTimeout: DurationArgument = DurationArgument(span: .seconds(75))

    /// Set by the supervisor on its workers: when `serve` started, from which the fault
    /// plan's clock runs unless the file was saved later (Unix seconds).
    @Option(name: .customLong("faults-origin"), help: .hidden)
    var faultsOrigin: Double?

    /// Set by the supervisor on the worker processes it starts: run this one server.
    @Option(help: .hidden)
    var worker: String?

    /// A server `fleetlab serve` runs in a worker: its name, default port and how to open it.
    struct Served: Sendable {
        var name: String
        var defaultPort: Int
        /// The stack whose server it is, which faults name (`server: sync`); nil: none can.
        var stack: StackKind?
        var make: @Sendable (ServeCommand) throws -> any ReferenceServer
    }

    /// Every server `fleetlab serve` runs besides the host. A new system adds one line.
    static let served: [Served] = [
        Served(name: "mobile-sync", defaultPort: 7710, stack: .sync) { try MobileSyncLiveServer(dataDirectory: $0.data, authRequired: !$0.noAuth) },
        Served(name: "chat", defaultPort: 7720, stack: .chat) { options in
            try SecureChatLiveServer(dataDirectory: options.data) { config in
                config.allowLegacyPlaintext = options.chatLegacyPlaintext
                config.authRequestsPerMinute = options.chatAuthPerMinute
            }
        },
        Served(name: "agent-runtime", defaultPort: 7730, stack: .agent) { options in
            try AgentRuntimeLiveServer(dataDirectory: options.data, workflows: try options.loadAgentWorkflows(), authRequired: !options.noAuth)
        },
        Served(name: "ai-bridge", defaultPort: 7740, stack: .aiBridge) { options in
            try AIBridgeRelayLiveServer(dataDirectory: options.data, withDaemon: !options.without.contains("ai-daemon"))
        },
        Served(name: "desktop-bridge", defaultPort: 9099, stack: nil) { options in
            try DesktopBridgeLiveServer(dataDirectory: options.data, workspace: options.workspace, allowTerminal: options.allowTerminal,
                                        agents: try options.parseDesktopAgents())
        },
    ]

    func validate() throws {
        guard (1...1_000_000).contains(chatAuthPerMinute) else { throw ValidationError("--chat-auth-per-minute must be 1...1000000") }
        if let advertise, advertise.isEmpty || advertise.contains(where: { "/ ?#@".contains($0) }) {
            throw ValidationError("--advertise takes a host name or address alone (no scheme, path or port), got '\(advertise)'")
        }
        guard headerTimeout.span >= .milliseconds(100), headerTimeout.span <= .hours(1) else {
            throw ValidationError("--header-timeout must be 100ms...1h")
        }
        guard idleTimeout.span >= .milliseconds(100), idleTimeout.span <= .hours(24) else {
            throw ValidationError("--idle-timeout must be 100ms...24h")
        }
    }

    /// TLS (`loadTLS`), the first request's deadline and the idle one, as every server
    /// meets a connection.
    func transport() throws -> ServerTransport {
        ServerTransport(tls: try loadTLS(), headerTimeout: .nanoseconds(headerTimeout.span.nanoseconds),
                        idleTimeout: .nanoseconds(idleTimeout.span.nanoseconds))
    }

    /// The certificate every server speaks TLS with, or nil for plain HTTP; the files are
    /// read now, so a bad one stops `serve` before anything listens.
    func loadTLS() throws -> ServerTLS? {
        switch (tlsCert, tlsKey) {
        case (nil, nil): return nil
        case (let cert?, let key?):
            do { return try ServerTLS(certificateFile: cert, keyFile: key) } catch { throw CLIFailure.badInput("\(error)") }
        case (nil, _?): throw CLIFailure.badInput("--tls-key needs --tls-cert, the certificate it is the key of")
        case (_?, nil): throw CLIFailure.badInput("--tls-cert needs --tls-key, its private key")
        }
    }

    /// The command line of the worker process that runs server `name`: this one's options.
    func workerArguments(_ name: String) -> [String] {
        var arguments = ["serve", "--worker", name, "--host", host, "--data", data, "--agent-workflows", agentWorkflows]
        if let advertise { arguments += ["--advertise", advertise] }
        if noAuth { arguments.append("--no-auth") }
        for skipped in without { arguments += ["--without", skipped] }
        if chatLegacyPlaintext { arguments.append("--chat-legacy-plaintext") }
        arguments += ["--chat-auth-per-minute", String(chatAuthPerMinute)]
        if let workspace { arguments += ["--workspace", workspace] }
        if allowTerminal { arguments.append("--allow-terminal") }
        for agent in desktopAgents { arguments += ["--desktop-agent", agent] }
        if let faultsFile, let faultsOrigin { arguments += ["--faults", faultsFile, "--faults-origin", String(faultsOrigin)] }
        if let tlsCert, let tlsKey { arguments += ["--tls-cert", tlsCert, "--tls-key", tlsKey] }
        arguments += ["--header-timeout", headerTimeout.span.description, "--idle-timeout", idleTimeout.span.description]
        return arguments
    }

    /// `--desktop-agent MODE=COMMAND`: the program (split on spaces) each mode runs.
    func parseDesktopAgents() throws -> [String: [String]] {
        var agents: [String: [String]] = [:]
        let modes = DesktopMode.defaults.map(\.id).filter { $0 != DesktopMode.defaults[0].id }
        for entry in desktopAgents {
            let parts = entry.split(separator: "=", maxSplits: 1).map(String.init)
            let argv = parts.count == 2 ? parts[1].split(separator: " ").map(String.init) : []
            guard parts.count == 2, modes.contains(parts[0]), !argv.isEmpty else {
                throw CLIFailure.badInput("--desktop-agent takes MODE=COMMAND with MODE one of \(modes.joined(separator: ", ")), got '\(entry)'")
            }
            agents[parts[0]] = argv
        }
        return agents
    }

    /// Names `--without` takes besides the servers: parts that run inside one.
    static let parts = ["ai-daemon"]

    /// The servers this run starts: every one but those `--without` names.
    var chosen: [Served] { Self.served.filter { !without.contains($0.name) } }

    /// The agent runtime's workflows: the folder's files, or the built-in demo when the
    /// default folder is absent (`fleetlab serve` run outside a checkout).
    func loadAgentWorkflows() throws -> [AgentWorkflow] {
        if agentWorkflows == AgentWorkflowFiles.defaultDirectory && !FileManager.default.fileExists(atPath: agentWorkflows) {
            return [AgentWorkflow.demo]
        }
        return try AgentWorkflowFiles.load(directory: agentWorkflows)
    }

    func run() async throws {
        let portMap = try parsePorts()
        if let worker { return try await runWorker(worker, ports: portMap) }
        if let unknown = without.first(where: { name in !Self.served.contains { $0.name == name } && !Self.parts.contains(name) }) {
            throw CLIFailure.badInput("--without: no server named '\(unknown)'; servers: \((Self.served.map(\.name) + Self.parts).joined(separator: ", "))")
        }
        if !without.contains("agent-runtime") {
            do { _ = try loadAgentWorkflows() } catch { throw CLIFailure.badInput("\(error)") }
        }
        _ = try parseDesktopAgents()
        if let workspace, !FileManager.default.fileExists(atPath: workspace) {
            throw CLIFailure.badInput("--workspace: no directory \(workspace)")
        }
        let hostPort = portMap["host"] ?? 7700
        do {
            try LiveHost.checkPorts(host: host, [("host", hostPort)] + chosen.map { ($0.name, portMap[$0.name] ?? $0.defaultPort) })
        } catch {
            throw CLIFailure.badInput(error.description)
        }
        // The faults' clock starts now, for the supervisor and every worker it (re)starts,
        // unless the file is saved later (then from that save).
        let origin = Date()
        let faults = try loadFaults(started: origin)
        let playing = Mutex(faults)
        let transport = try transport()
        var options = self
        if faults != nil { options.faultsOrigin = origin.timeIntervalSince1970 }
        try FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: true)
        let supervisor = ServerSupervisor(executable: ServerSupervisor.currentExecutable, workers: chosen.map { server in
            let name = server.name
            let base = options.workerArguments(name)
            return (name, portMap[name] ?? server.defaultPort, { port in base + ["--port", "\(name)=\(port)"] })
        }, log: { Console.error($0) })
        let ready: [ServerSupervisor.Ready]
        do {
            ready = try supervisor.start()
        } catch {
            throw CLIFailure.badInput("\(error)")
        }
        if let faultsFile {
            supervisor.playOutages { playing.withLock { $0.map { ($0.timetable, $0.origin) } } }
            let file = faultsFile
            Self.watchFaults(file: file, chosen: chosen, started: origin, log: { Console.error($0) }) { changed in
                playing.withLock { $0 = changed }
                let lines = ["fleetlab serve: \(file) was saved: its plan plays from now"] + Self.describe(changed, file: file).dropFirst()
                FileHandle.standardOutput.write(Data((lines.joined(separator: "\n") + "\n").utf8))
            }
        }
        let hostServer = HostServer(defaultPort: 7700, version: FleetlabVersion.string) {
            let statuses = supervisor.statuses
            return ready.map { r in
                let status = statuses.first { $0.name == r.name }
                return .init(name: r.name, summary: r.summary, port: status?.port ?? r.port, pid: status?.pid, restarts: status?.restarts,
                             fault: Self.faultNow(playing.withLock { $0 }, server: r.name, down: status?.down ?? false))
            }
        }
        let live = LiveHost(configuration: .init(host: host, ports: ["host": hostPort], transport: transport, advertisedHost: advertise), servers: [hostServer])
        do {
            try await live.run { endpoints in
                var all: [(name: String, url: String, summary: String, details: [String])] = endpoints.map { ($0.name, $0.url, $0.summary, []) }
                all += ready.map { ($0.name, $0.url, $0.summary, $0.details) }
                all.sort { (Int($0.url.split(separator: ":").last ?? "") ?? 0) < (Int($1.url.split(separator: ":").last ?? "") ?? 0) }
                var lines = ["fleetlab serve \(FleetlabVersion.string) — listening (Ctrl-C to stop)"]
                for (name, url, summary, details) in all {
                    lines.append("  \(name)  \(url)  \(summary)")
                    for detail in details { lines.append("      \(detail)") }
                }
                if let faults, let file = faultsFile { lines += Self.describe(faults, file: file) }
                FileHandle.standardOutput.write(Data((lines.joined(separator: "\n") + "\n").utf8))
            }
        } catch let error as LiveHostError {
            supervisor.stop()
            throw CLIFailure.badInput(error.description)
        }
        supervisor.stop()
        print("fleetlab serve: stopped")
    }

    func parsePorts() throws -> [String: Int] {
        var portMap: [String: Int] = [:]
        let names = ["host"] + Self.served.map(\.name)
        for entry in ports {
            let parts = entry.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2, let port = Int(parts[1]), (0...65_535).contains(port) else {
                throw CLIFailure.badInput("--port takes NAME=PORT with PORT in 0...65535, got '\(entry)'")
            }
            guard names.contains(parts[0]) else {
                throw CLIFailure.badInput("--port: no server named '\(parts[0])'; servers: \(names.joined(separator: ", "))")
            }
            portMap[parts[0]] = port
        }
        return portMap
    }

    /// A worker: one server, on the port the supervisor gives, announced on stdout.
    func runWorker(_ name: String, ports: [String: Int]) async throws {
        WorkerProcess.dieWithParent()
        guard let served = Self.served.first(where: { $0.name == name }) else { throw CLIFailure.badInput("no server named '\(name)'") }
        let server: any ReferenceServer
        do {
            server = try served.make(self)
        } catch {
            throw CLIFailure.badInput("cannot open the \(name) server's data under \(data): \(error)")
        }
        playFaults(as: served)
        let live = LiveHost(configuration: .init(host: host, ports: [name: ports[name] ?? served.defaultPort], transport: try transport(), advertisedHost: advertise),
                            servers: [server])
        do {
            try await live.run { endpoints in
                guard let endpoint = endpoints.first else { return }
                // Ready once what its details say holds (the AI bridge's first PIN known to its relay).
                Task {
                    await server.settle()
                    let ready = ServerSupervisor.Ready(name: name, port: endpoint.port, url: endpoint.url, summary: server.summary, details: server.details)
                    let json = (try? JSONEncoder().encode(ready)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
                    FileHandle.standardOutput.write(Data((ServerSupervisor.readyPrefix + json + "\n").utf8))
                }
            }
        } catch let error as LiveHostError {
            throw CLIFailure.badInput(error.description)
        }
    }
}

/// What a worker process does for its supervisor.
enum WorkerProcess {
    /// Set by a parent fleetlab in its fleetlab children (a bench's `serve`, `loadtest` and
    /// runs): each exits with its parent, so none outlives a bench that was killed alone
    /// (a cancelled CI job, `kill`), as a bench's `fleetlab serve` did, holding its ports.
    static let exitWithParentVariable = "FLEETLAB_EXIT_WITH_PARENT"

    /// `dieWithParent` when the parent asked for it (`exitWithParentVariable`).
    static func dieWithParentIfAsked() {
        if ProcessInfo.processInfo.environment[exitWithParentVariable] == "1" { dieWithParent() }
    }

    /// The environment for a child that exits with this process.
    static var tiedEnvironment: [String: String] {
        ProcessInfo.processInfo.environment.merging([exitWithParentVariable: "1"]) { $1 }
    }

    /// Exits once the supervisor is gone (the worker is then re-parented), so no worker
    /// outlives a `fleetlab serve` that was killed outright. One watcher however often it
    /// is asked: a worker of a bench's serve is asked twice (as a worker, and by the
    /// variable it inherits).
    static func dieWithParent() { _ = parentWatch }

    private static let parentWatch: Void = {
        let parent = getppid()
        let watcher = Thread {
            while getppid() == parent { Thread.sleep(forTimeInterval: 0.5) }
            exit(0)
        }
        watcher.name = "fleetlab-worker-parent-watch"
        watcher.start()
    }()
}
