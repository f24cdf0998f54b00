import ArgumentParser
import ServerStorage
import DeviceWorkflows
import Orch8Wire
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LabKernel
import LabStore
import Live
import MobileSyncServer
import Simulator

/// `fleetlab bench sync`: the sync server core in process, with its SQLite commits, and
/// over loopback HTTP from a real client, on the same requests.
struct SyncBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync",
        abstract: "Sync server throughput: the core in process, with SQLite, and over loopback HTTP, side by side.",
        discussion: """
        DEVICES registered devices each send syncs carrying STATUSES status updates (their \
        instances' timelines), one approval request the first time, and the acks of what \
        they received. The same request sequence runs through the server core alone, the \
        core committing every request to SQLite (WAL), and `fleetlab serve`'s HTTP stack on \
        127.0.0.1 from CONCURRENCY client connections. Build with `swift build -c release`.
        """)

    @Option(help: "Registered devices.")
    var devices = 1_000

    @Option(help: "Sync requests per measurement.")
    var requests = 20_000

    @Option(help: "Status updates per request.")
    var statuses = 5

    @Option(help: "Concurrent HTTP clients in the loopback measurement.")
    var concurrency = 8

    @Option(help: "Approvals on the server for the dashboard-poll measurement (against one with DEVICES approvals).")
    var approvals = 77_000

    @OptionGroup var output: BenchJSON

    func validate() throws {
        guard (1...100_000).contains(devices), (1...10_000_000).contains(requests), (0...100).contains(statuses),
              (1...256).contains(concurrency), (1...1_000_000).contains(approvals) else {
            throw ValidationError("--devices 1...100000, --requests 1...10000000, --statuses 0...100, --concurrency 1...256, --approvals 1...1000000")
        }
    }

    /// The request bodies, device by device, round-robin.
    func bodies() -> [(device: String, body: [UInt8])] {
        var generator = StreamSeed(17).generator()
        let steps: JSONValue = .array((0..<11).map { n in
            ["block_id": .string("step_\(n)"), "block_type": "step", "state": n < 4 ? "completed" : "pending",
             "handler": .string("handler_\(n)"), "started_at": "2026-01-01T00:00:00Z", "completed_at": .null]
        })
        var out: [(String, [UInt8])] = []
        out.reserveCapacity(requests)
        for n in 0..<requests {
            let device = "device-\(n % devices)"
            let round = n / devices
            let updates = (0..<statuses).map { k in
                StatusUpdate(instanceID: UUIDText.random(using: &generator), sequenceName: "onboarding-flow", state: "Running",
                             currentStep: "step_4", handler: "handler_4",
                             timestamp: RFC3339.format(unixMilliseconds: 1_767_225_600_000 + Int64(round * 1000 + k)), steps: steps)
            }
            let approvals = round == 0 ? [ApprovalRequest(instanceID: UUIDText.random(using: &generator), blockID: "gate", sequenceName: "s",
                                                          prompt: "ok?", choices: nil, storeAs: nil, timeoutSeconds: nil)] : []
            var bytes: [UInt8] = []
            SyncRequest(deviceID: device, statusUpdates: updates, approvalRequests: approvals).json.write(to: &bytes)
            out.append((device, bytes))
        }
        return out
    }

    func run() async throws {
        try output.check()
        let requests = bodies()
        var server = SyncServer(config: SyncServerConfig(), seed: StreamSeed(1), wallClock: .simulationEpoch)
        let root = server.bootstrap(now: .zero)
        for n in 0..<devices {
            let body = JSONValue.object(["device_id": .string("device-\(n)"), "platform": "ios"]).canonicalText
            _ = server.handle(HTTPRequestMessage(method: "POST", path: "/api/v1/mobile/devices/register", headers: ["x-api-key": root],
                                                 body: Array(body.utf8)), now: .zero)
        }
        _ = server.state.takeChanges()
        let start = server

        // 1. The core alone.
        var memory = start
        var began = WallClock.seconds()
        for (index, request) in requests.enumerated() {
            let reply = memory.handle(HTTPRequestMessage(method: "POST", path: "/api/v1/mobile/sync", headers: ["x-api-key": root],
                                                         body: request.body), now: .zero + .milliseconds(Int64(index)))
            guard reply.response.status == 200 else { throw CLIFailure.badInput("the core answered \(reply.response.status)") }
        }
        let coreSeconds = WallClock.seconds() - began

        // 2. The core committing each request to SQLite.
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("fleetlab-bench-sync-\(getpid())")
        defer { try? FileManager.default.removeItem(at: directory) }
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let store = try SQLiteSyncServerStore(path: directory.appendingPathComponent("core.sqlite").path)
        var persisted = start
        try store.apply(persisted.state.takeChanges())
        began = WallClock.seconds()
        for (index, request) in requests.enumerated() {
            let reply = persisted.handle(HTTPRequestMessage(method: "POST", path: "/api/v1/mobile/sync", headers: ["x-api-key": root],
                                                            body: request.body), now: .zero + .milliseconds(Int64(index)))
            try store.apply(reply.changes)
        }
        let sqliteSeconds = WallClock.seconds() - began

        // 3. fleetlab serve's HTTP stack on loopback, from real HTTP clients.
        let live = try MobileSyncLiveServer(dataDirectory: directory.appendingPathComponent("served").path, seed: 1)
        let key = live.rootAPIKey
        let host = LiveHost(configuration: .init(ports: [live.name: 0]), servers: [live])
        guard let base = try await host.start().first?.url else { throw CLIFailure.badInput("the loopback server did not start") }
        for n in 0..<devices {
            try await post(base + "/api/v1/mobile/devices/register", key: key,
                           body: Array(JSONValue.object(["device_id": .string("device-\(n)"), "platform": "ios"]).canonicalText.utf8))
        }
        let latencies = LatencyLog()
        began = WallClock.seconds()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for worker in 0..<concurrency {
                group.addTask {
                    var index = worker
                    while index < requests.count {
                        let sent = WallClock.seconds()
                        try await post(base + "/api/v1/mobile/sync", key: key, body: requests[index].body)
                        latencies.record(WallClock.seconds() - sent)
                        index += concurrency
                    }
                }
            }
            try await group.waitForAll()
        }
        let httpSeconds = WallClock.seconds() - began
        try await host.stop()

        // 4. What a dashboard poll costs under the lock, with few and with many approvals.
        let small = pollsPerSecond(memory, root: root)
        let large = pollsPerSecond(withApprovals(start, count: approvals), root: root)

        let count = Double(requests.count)
        let n = { (v: Double) in MetricUnit.decimal(v, digits: 0) }
        let core = count / coreSeconds, sqlite = count / sqliteSeconds, http = count / httpSeconds
        print("fleetlab bench sync — \(n(count)) syncs from \(n(Double(devices))) devices, \(statuses) statuses each (\(BuildInfo.description))")
        print("  core in process      \(n(core)) syncs/s")
        print("  core + SQLite (WAL)  \(n(sqlite)) syncs/s  (\(MetricUnit.decimal(sqlite / core, digits: 3))× the core)")
        let (p50, p99) = latencies.percentiles()
        print("  loopback HTTP        \(n(http)) syncs/s  (\(MetricUnit.decimal(http / core, digits: 3))× the core, "
            + "\(MetricUnit.decimal(http / sqlite, digits: 3))× core + SQLite; \(concurrency) clients, "
            + "p50 \(MetricUnit.decimal(p50 * 1000, digits: 2)) ms, p99 \(MetricUnit.decimal(p99 * 1000, digits: 2)) ms)")
        print("  dashboard poll       \(n(large)) polls/s with \(n(Double(approvals))) approvals, \(n(small)) with \(n(Double(devices))) "
            + "(\(MetricUnit.decimal(large / small, digits: 2))×; GET /mobile/approvals?state=pending&limit=1)")
        try output.write(bench: "sync", parameters: ["devices": .figure(Double(devices)), "requests": .figure(count), "statuses": .figure(Double(statuses)),
                                                  "concurrency": .figure(Double(concurrency)), "approvals": .figure(Double(approvals))],
                         figures: ["core_syncs_per_second": .figure(core), "sqlite_syncs_per_second": .figure(sqlite), "http_syncs_per_second": .figure(http),
                                   "http_p50_seconds": .figure(p50), "http_p99_seconds": .figure(p99),
                                   "polls_per_second_many_approvals": .figure(large), "polls_per_second_few_approvals": .figure(small)])
        #if DEBUG
        print("  note                 this is a debug build; use `swift build -c release` for real figures")
        #endif
    }

    /// `start` with `count` more approvals, spread over its devices, half of them resolved.
    func withApprovals(_ start: SyncServer, count: Int) -> SyncServer {
        var server = start
        var generator = StreamSeed(23).generator()
        for n in 0..<count {
            let request = SyncRequest(deviceID: "device-\(n % devices)", approvalRequests: [
                ApprovalRequest(instanceID: UUIDText.random(using: &generator), blockID: "gate", sequenceName: "s", prompt: "ok?",
                                choices: nil, storeAs: nil, timeoutSeconds: 86_400)])
            let outcome = try? server.sync(request, tenant: "", now: .zero + .milliseconds(Int64(n)))
            if n % 2 == 0, let id = outcome?.newApprovals.first?.id { _ = try? server.resolve(approval: id, value: "yes", now: .zero + .milliseconds(Int64(n))) }
        }
        return server
    }

    /// Dashboard polls per second through the core (the part that holds the server's lock).
    func pollsPerSecond(_ start: SyncServer, root: String) -> Double {
        var server = start
        let polls = 2_000
        let began = WallClock.seconds()
        for index in 0..<polls {
            _ = server.handle(HTTPRequestMessage(method: "GET", target: "/api/v1/mobile/approvals?state=pending&limit=1", headers: ["x-api-key": root]),
                              now: .zero + .seconds(Int64(index)))
        }
        return Double(polls) / (WallClock.seconds() - began)
    }

    func post(_ url: String, key: String, body: [UInt8]) async throws {
        var request = URLRequest(url: URL(string: url)!)
        request.httpMethod = "POST"
        request.httpBody = Data(body)
        request.setValue(key, forHTTPHeaderField: "x-api-key")
        request.setValue("application/json", forHTTPHeaderField: "content-type")
        let (_, response) = try await URLSession.shared.data(for: request)
        guard let http = response as? HTTPURLResponse, (200..<300).contains(http.statusCode) else {
            throw CLIFailure.badInput("the loopback server answered \((response as? HTTPURLResponse)?.statusCode ?? 0) for \(url)")
        }
    }
}

/// Request latencies from concurrent clients.
final class LatencyLog: @unchecked Sendable {
    private let lock = NSLock()
    private var values: [Double] = []

    func record(_ seconds: Double) { lock.withLock { values.append(seconds) } }

    func percentiles() -> (Double, Double) {
        let sorted = lock.withLock { values.sorted() }
        guard !sorted.isEmpty else { return (0, 0) }
        return (sorted[sorted.count / 2], sorted[min(sorted.count - 1, Int(Double(sorted.count) * 0.99))])
    }
}
