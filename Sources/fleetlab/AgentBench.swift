import AgentRuntimeClient
import AgentRuntimeServer
import AgentRuntimeWire
import ArgumentParser
import Foundation
import LabKernel
import LabStore
import Live
import Simulator

/// `fleetlab bench agent`: whole agent chats (start, socket, resume, an input, a streamed
/// answer, completion) through the runtime core in process, and through `fleetlab
/// serve`'s runtime on loopback from real clients (the client core over `HTTPClient` and
/// `WebSocketClient`), side by side.
struct AgentBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "agent",
        abstract: "Agent runtime throughput: whole chats through the core in process and over loopback, side by side.",
        discussion: """
        A chat: POST …/start, the socket with client.resume, one input, a four-chunk \
        answer with usage, chat.run_complete. The core measurement plays the same chats \
        through the server core alone (no sockets, no SQLite); the loopback one runs \
        CLIENTS phones, each starting its next chat when the last completes, against the \
        live server (SQLite commits included) for DURATION. Client and server share the \
        process, so chats per CPU-second counts both. Build with `swift build -c release`.
        """)

    @Option(help: "Concurrent phones in the loopback measurement.")
    var clients = 32

    @Option(help: "How long the loopback measurement runs (e.g. 10s).")
    var duration = "10s"

    @Option(help: "Chats through the core in process.")
    var chats = 20_000

    @OptionGroup var output: BenchJSON

    static let workflow = AgentWorkflow(name: "bench", entryPoint: true, agents: ["Bench"], turns: [[
        .say(agent: "Bench", text: "one two three four five six seven eight nine ten eleven twelve", wordsPerChunk: 3, every: .zero),
        .usage(promptTokens: 100, completionTokens: 20),
        .complete(summary: "done"),
    ]])

    func validate() throws {
        guard (1...1_000).contains(clients), (1...10_000_000).contains(chats), let span = TimeSpan(duration), span >= .seconds(1), span <= .hours(1) else {
            throw ValidationError("--clients 1...1000, --chats 1...10000000, --duration 1s...1h")
        }
    }

    func run() async throws {
        try output.check()
        let core = coreChatsPerSecond()
        let live = try await loopback()
        let n = { (v: Double) in MetricUnit.decimal(v, digits: 0) }
        print("fleetlab bench agent — whole chats: start, socket, resume, an input, a streamed answer, completion (\(BuildInfo.description))")
        print("  core in process   \(n(core)) chats/s")
        print("  loopback          \(n(live.rate)) chats/s, \(n(live.perCPU)) per CPU-second (\(clients) phones, \(n(Double(live.chats))) chats in "
            + "\(MetricUnit.decimal(live.seconds, digits: 1)) s; chat p50 \(MetricUnit.decimal(live.p50 * 1000, digits: 1)) ms, "
            + "p99 \(MetricUnit.decimal(live.p99 * 1000, digits: 1)) ms; \(MetricUnit.decimal(live.rate / core * 100, digits: 1))% of the core)")
        try output.write(bench: "agent", parameters: ["clients": .figure(Double(clients)), "chats": .figure(Double(chats)), "duration": .string(duration)],
                         figures: ["core_chats_per_second": .figure(core), "loopback_chats_per_second": .figure(live.rate),
                                   "loopback_chats_per_cpu_second": .figure(live.perCPU), "chat_p50_seconds": .figure(live.p50),
                                   "chat_p99_seconds": .figure(live.p99)])
        #if DEBUG
        print("  note              this is a debug build; use `swift build -c release` for real figures")
        #endif
    }

    /// Chats per second through the server core alone.
    func coreChatsPerSecond() -> Double {
        var config = AgentServerConfig()
        config.authRequired = false
        config.workflows = [Self.workflow]
        var server = AgentServer(config: config, seed: StreamSeed(3), wallClock: .simulationEpoch)
        let began = WallClock.seconds()
        for index in 0..<chats {
            let now = Instant.zero + .milliseconds(Int64(index))
            let body = JSONValue.object(["user_id": .string("u\(index % 100)"), "client_request_id": .string("r\(index)")]).canonicalText
            let started = server.handle(HTTPRequestMessage(method: "POST", path: "/api/chats/bench/bench/start", body: Array(body.utf8)), now: now)
            guard let chat = started.response.jsonBody?["chat_id"]?.stringValue,
                  case .accepted(let connection, _) = server.connect(path: "/ws/bench/bench/\(chat)/u\(index % 100)", query: ["resume": "client"], now: now)
            else { continue }
            _ = server.receive(connection, text: ClientMessage.resume(chatID: chat, lastClientIndex: -1).text, now: now)
            _ = server.receive(connection, text: ClientMessage.userInput(chatID: chat, text: "go", context: nil, clientMessageID: "m").text, now: now)
            while server.state.chats[chat]?.completed == false, server.state.chats[chat]?.run != nil { _ = server.runDue(chat, now: now) }
            server.disconnect(connection)
        }
        return Double(chats) / (WallClock.seconds() - began)
    }

    struct Loopback {
        var chats: Int
        var seconds: Double
        var rate: Double
        var perCPU: Double
        var p50: Double
        var p99: Double
    }

    func loopback() async throws -> Loopback {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("fleetlab-bench-agent-\(getpid())")
        defer { try? FileManager.default.removeItem(at: directory) }
        let server = try AgentRuntimeLiveServer(dataDirectory: directory.path, workflows: [Self.workflow], authRequired: false, seed: 1)
        let host = LiveHost(configuration: .init(ports: [server.name: 0]), servers: [server])
        guard let base = try await host.start().first?.url else { throw CLIFailure.badInput("the loopback runtime did not start") }
        let http = HTTPClient()
        let span = TimeSpan(duration)!.seconds
        let latencies = LatencyLog()
        let cpuBefore = WallClock.cpuSeconds()
        let began = WallClock.seconds()
        let counts = try await withThrowingTaskGroup(of: Int.self) { group in
            for phone in 0..<clients {
                group.addTask {
                    let client = AgentClient(snapshot: AgentClient.Snapshot(appID: "bench", userID: "p\(phone)", token: nil, seed: StreamSeed(UInt64(phone))))
                    let device = try LiveAgentPhone(base: base, client: client, http: http)
                    var done = 0
                    var chatBegan = WallClock.seconds()
                    await device.feed(.startNew(workflow: "bench"))
                    for await effect in device.effects {
                        switch effect {
                        case .resumed:
                            if await device.client.activeChat?.lastIndex == -1 { await device.feed(.submit(text: "go")) }
                        case .runCompleted:
                            latencies.record(WallClock.seconds() - chatBegan)
                            done += 1
                            guard WallClock.seconds() - began < span else {
                                await device.stop()
                                continue
                            }
                            chatBegan = WallClock.seconds()
                            await device.feed(.startNew(workflow: "bench"))
                        default:
                            break
                        }
                    }
                    return done
                }
            }
            return try await group.reduce(0, +)
        }
        let seconds = WallClock.seconds() - began
        let cpu = WallClock.cpuSeconds() - cpuBefore
        http.shutdown()
        try? await host.stop()
        let (p50, p99) = latencies.percentiles()
        return Loopback(chats: counts, seconds: seconds, rate: Double(counts) / seconds, perCPU: cpu > 0 ? Double(counts) / cpu : 0, p50: p50, p99: p99)
    }
}
