import ArgumentParser
import Foundation
import LabKernel
import LabStore
import Live
import LoadTest
import Reports
import Simulator

struct LoadtestCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "loadtest",
        abstract: "Drive a real server with the scenario's client cores on the wall clock; results and dashboard as a simulation's.",
        discussion: """
        Virtual phones run the same client cores as the simulator against the targets named \
        with --target, and nothing else: sync (the engine and its sync client), agent (the \
        agent runtime's client: one chat per iteration), chat (the end-to-end encrypted \
        chat client: phones in pairs, one message per iteration, delivered when the partner \
        decrypts it) and ai-bridge (the AI bridge relay: each phone paired with a desktop \
        daemon the generator runs, one prompt per iteration, its answer streamed back); with \
        several, each iteration does each in that order. Closed model \
        (default): --devices phones, each waiting --think between iterations; with --stages \
        30s:100,2m:100,30s:0 the phones ramp up, hold and ramp down (k6's stages). Open \
        model: --rate iterations per second (ramped over --ramp), or --stages \
        30s:200/s,1m:200/s, each taken by an idle phone of --devices; with none idle it is \
        dropped and counted. Latency counts from each iteration's intended start, so a \
        lagging generator cannot hide it.

        The key for a target comes from --key NAME=KEY or the environment variable \
        FLEETLAB_KEY_<NAME> (e.g. FLEETLAB_KEY_SYNC), and is never written to the results: \
        sync's API key (a root key makes a tenant for the run), agent's bearer token (its \
        app_id and user_id are who the phones chat as; none for a runtime without auth). \
        chat takes none: each phone signs up a user of its own.

        Exit status: 0 thresholds held, 2 bad input, 3 a threshold failed or no iteration succeeded, 130 interrupted \
        (the results so far are written).
        """)

    @Argument(help: "A scenario file: its workflows, thresholds and seed are used.")
    var scenario: String

    @Option(name: .customLong("target"), help: "A server to drive, NAME=URL: sync=http://127.0.0.1:7710, chat=http://127.0.0.1:7720, agent=http://127.0.0.1:7730, ai-bridge=http://127.0.0.1:7740 (repeatable).")
    var targets: [String] = []

    @Option(name: .customLong("key"), help: "A target's API key, NAME=KEY (or FLEETLAB_KEY_<NAME> in the environment).")
    var keys: [String] = []

    @Option(help: "How long to run, e.g. 60s or 5m (required unless --stages; at most 24h).")
    var duration: DurationArgument?

    @Option(help: "Virtual phones: the closed model's population, or the open model's pool (default 50).")
    var devices: Int?

    @Option(help: "Load in stages, each DURATION:TARGET reached linearly from the previous: phones (30s:100,2m:100,30s:0, the closed model) or arrivals a second (30s:200/s,1m:200/s, the open model). The run lasts their total.")
    var stages: String?

    @Option(help: "Open model: iterations per second, e.g. 200 or 200/s.")
    var rate: String?

    @Option(help: "Open model: time to ramp the rate up from 0.")
    var ramp: DurationArgument?

    @Option(name: .customLong("max-wait"), help: "Open model: how long an arrival may wait for an idle phone before it is dropped.")
    var maxWait: DurationArgument?

    @Flag(name: .customLong("app-paced"), help: "Closed model paced as the app: each phone ticks its engine and syncs when its sync client says one is due (the server's interval), so the sync cadence is measured.")
    var appPaced = false

    @Option(help: "Closed model: mean wait between a phone's iterations (0.5-1.5x of it).")
    var think: DurationArgument?

    @Option(help: "Chat and sync: the chance (like 20% or 0.2) that a phone's app is killed after an iteration; its next iteration launches it again from what it stored (chat: session restore, socket, catch-up before it sends; sync: the engine restored from its store before it syncs).")
    var relaunch: String?

    @Option(help: "Run one generator's share of the workload, I/N (0-based): its slice of the phones (with --stages, every N-th one), or 1/N of the arrival rate. Merge the generators' results with `fleetlab merge`.")
    var shard: String?

    @Option(help: "Output directory (default: runs/<scenario name>-loadtest).")
    var out: String?

    @Option(name: .customLong("request-timeout"), help: "How long one request may take before it counts failed (default 10s); a chat message must reach the partner within three of these.")
    var requestTimeout: DurationArgument?

    @Option(help: "Event-loop threads the phones run on (default: half the cores, at least 1).")
    var loops: Int?

    @Option(help: "Whose keep-alive connections requests go on: phone (each phone its own, as an app's; default) or shared (one pool for all phones, the fewest connections the load can go on).")
    var connections: ConnectionsArgument = ConnectionsArgument(model: .perPhone)

    @Flag(help: "No progress line.")
    var quiet = false

    @OptionGroup var tlsOptions: ClientTLSOptions

    @OptionGroup var proxyOptions: ClientProxyOptions

    @Option(name: .customLong("dashboard-port"), help: "Serve the dashboard of the results so far on 127.0.0.1:PORT while the run goes on (0: a free port; the URL is printed), refreshed every 2 s.")
    var dashboardPort: Int?

    @Option(help: "Write the thresholds as JUnit XML to this file.")
    var junit: String?

    @Option(help: "Write the summary as JSON to this file.")
    var json: String?

    func validate() throws {
        if let devices, !(1...100_000).contains(devices) { throw ValidationError("--devices must be 1...100000") }
        if let duration, !(duration.span > .zero && duration.span <= .hours(24)) { throw ValidationError("--duration must be more than 0 and at most 24h") }
        if let loops, !(1...256).contains(loops) { throw ValidationError("--loops must be 1...256") }
        if let dashboardPort, !(0...65_535).contains(dashboardPort) { throw ValidationError("--dashboard-port must be 0...65535") }
        if let requestTimeout, !(requestTimeout.span >= .milliseconds(10) && requestTimeout.span <= .minutes(10)) {
            throw ValidationError("--request-timeout must be 10ms...10m")
        }
    }

    func run() async throws {
        let loaded: Scenario
        do { loaded = try ScenarioLoader.load(path: scenario) } catch { throw CLIFailure.badInput("\(error)") }
        var urls: [String: String] = [:]
        for target in targets {
            let parts = target.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2, let url = URL(string: parts[1]), url.scheme == "http" || url.scheme == "https", url.host != nil else {
                throw CLIFailure.badInput("--target \(target): expected NAME=http://host:port or NAME=https://host[:port]")
            }
            guard Self.stacks.contains(parts[0]) else {
                throw CLIFailure.badInput("--target \(parts[0]): loadtest drives sync, agent, chat and ai-bridge (--target sync=URL, agent=URL, chat=URL, ai-bridge=URL); the desktop bridge is a server on one person's desktop, not a deployment to load")
            }
            urls[parts[0]] = parts[1].hasSuffix("/") ? String(parts[1].dropLast()) : parts[1]
        }
        guard !urls.isEmpty else { throw CLIFailure.badInput("name the server to drive: --target sync=http://host:port, agent=http://host:port, chat=http://host:port or ai-bridge=http://host:port") }
        let tls = try tlsOptions.make(httpsTargets: urls.values.contains { $0.hasPrefix("https://") })
        let proxies = try proxyOptions.make()
        var keyOf: [String: String] = [:]
        for name in Self.stacks { keyOf[name] = ProcessInfo.processInfo.environment["FLEETLAB_KEY_\(name.uppercased())"] }
        for entry in keys {
            let parts = entry.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2 else { throw CLIFailure.badInput("--key takes NAME=KEY") }
            guard urls[parts[0]] != nil else { throw CLIFailure.badInput("--key \(parts[0]): no --target of that name") }
            guard parts[0] != "ai-bridge" else { throw CLIFailure.badInput("--key ai-bridge: the relay takes no key; each phone pairs with the PIN of a desktop the generator runs") }
            keyOf[parts[0]] = parts[1]
        }
        var (model, runLength) = try workload(urls: urls)
        let slice = try shard.map { text in
            guard let slice = FleetShard(parsing: text) else { throw CLIFailure.badInput("--shard \(text): expected I/N with 0 <= I < N, like 0/4") }
            return slice
        }
        if let slice {
            model = model.slice(slice)
            guard model.devices >= 1 else { throw CLIFailure.badInput("--shard \(slice): this generator's share of the phones is none; use fewer shards") }
        }
        let devices = model.devices
        if urls["chat"] != nil, devices < 2 { throw CLIFailure.badInput("--target chat: phones chat in pairs, so --devices must be at least 2") }
        var relaunchShare = Ratio.zero
        if let relaunch {
            guard let share = Ratio(parsing: relaunch) else { throw CLIFailure.badInput("--relaunch \(relaunch): expected a chance, like 20% or 0.2") }
            guard urls["chat"] != nil || urls["sync"] != nil else {
                throw CLIFailure.badInput("--relaunch kills and relaunches the apps of chat and sync phones: it needs --target chat=URL or --target sync=URL")
            }
            guard !appPaced else { throw CLIFailure.badInput("--relaunch kills apps between iterations; --app-paced phones run one app for the whole test") }
            relaunchShare = share
        }
        if urls["agent"] != nil, let token = keyOf["agent"], AgentIdentity(token: token) == nil {
            throw CLIFailure.badInput("--key agent: expected the runtime's bearer token (a JWT with app_id and user_id, as fleetlab serve prints it)")
        }
        // Each request's deadline: the phones' and the set-up's (the agent listing, the tenant).
        let requestDeadline: Duration = requestTimeout.map { .nanoseconds($0.span.nanoseconds) } ?? .seconds(10)
        if let agentURL = urls["agent"], let mix = loaded.agent?.mix, !mix.isEmpty,
           let gap = await AgentListing.gap(mix.map(\.workflow.name), url: agentURL, token: keyOf["agent"], timeout: requestDeadline, tls: tls, proxies: proxies) {
            throw CLIFailure.badInput("--target agent: the runtime at \(agentURL) does not list \(gap.missing.joined(separator: ", ")), which the scenario's "
                + "agent.workflows names (it lists \(gap.listed.isEmpty ? "none" : gap.listed.joined(separator: ", "))); its phones would chat with another workflow")
        }
        let directory = out ?? "runs/\(loaded.name)-loadtest"
        try OutputPaths.prepareDirectory(directory)
        for file in [junit, json].compactMap({ $0 }) { try OutputPaths.checkWritableFile(file) }
        let resultsPath = (directory as NSString).appendingPathComponent("results.sqlite")
        let dashboardPath = (directory as NSString).appendingPathComponent("dashboard.html")

        // Buckets of wall time fine enough for a short test: at most 120 of them.
        let runTag = LoadRun.runTag(startingAt: UInt64(Date().timeIntervalSince1970 * 1000))
        var setup: TenantSetup.Outcome?
        if let syncURL = urls["sync"] {
            // The set-up's request has the phones' deadline (as the agent check's above): a
            // target that never answers holds the start for `--request-timeout`, not 10 s.
            setup = await TenantSetup.prepare(syncURL: syncURL, key: keyOf["sync"] ?? "", tenant: loaded.sync?.tenant ?? "fleet", runTag: runTag,
                                              timeout: requestDeadline, tls: tls, proxies: proxies)
        }
        let bucket = ([1, 5, 10, 30, 60, 300, 600, 900, 1_800, 3_600] as [Int64]).map { TimeSpan(nanoseconds: $0 * 1_000_000_000) }
            .first { runLength.nanoseconds / $0.nanoseconds <= 120 } ?? .hours(1)
        let startedAt = WallClock.timestamp()
        let targetList = urls.keys.sorted().map { "\($0)=\(urls[$0]!)" }.joined(separator: " ")
        // Thresholds on what a live run does not measure (battery, ticks, cadence, stacks not
        // targeted) are listed as skipped, not failed for lack of data.
        var live = loaded
        var measurable = Self.liveMetrics
        if case .app = model { measurable.insert("sync.interval") }
        if urls["agent"] != nil { measurable.insert("agent.first_chunk") }
        if urls["chat"] != nil { measurable.insert("chat.delivery_latency") }
        if urls["ai-bridge"] != nil { measurable.formUnion(["bridge.first_chunk", "bridge.latency", "bridge.requests", "bridge.pairings", "bridge.pairing_time"]) }
        let (measured, skipped) = Self.liveThresholds(loaded.thresholds, stacks: Set(urls.keys), metrics: measurable)
        live.thresholds = measured
        var settings = LoadRun.Settings(scenario: live, model: model, duration: runLength, bucket: bucket,
                                        sync: urls["sync"].map { ($0, setup?.key ?? "") }, agent: urls["agent"].map { ($0, keyOf["agent"]) }, runTag: runTag)
        settings.chat = urls["chat"]
        settings.relaunchShare = relaunchShare
        settings.aiBridge = urls["ai-bridge"]
        settings.tls = tls
        settings.proxies = proxies
        settings.requestTimeout = requestDeadline
        settings.loops = loops ?? LoadRun.defaultLoops
        settings.connections = connections.model
        let pipeline: ResultsPipeline
        do { pipeline = try ResultsPipeline(path: resultsPath) } catch { throw CLIFailure.badInput("cannot write \(resultsPath): \(error)") }
        var opening = LoadtestCommand.openingBatch(loaded, model: model, duration: runLength, bucket: bucket,
                                                   stacks: Self.stacks.filter { urls[$0] != nil }.flatMap { $0 == "sync" ? ["workflows", "sync"] : [$0] })
        // What the page says while the run goes on; the end writes these again with the rest.
        opening.runMetadata = [("mode", "loadtest"), ("targets", targetList), ("model", Self.describe(model, connections.model)), ("started_at", startedAt),
                               ("build", BuildInfo.description)]
        pipeline.submit(opening)
        var livePage: LiveHost?
        if let dashboardPort { livePage = try await Self.serveDashboard(of: resultsPath, port: dashboardPort, thresholds: live.thresholds) }
        Interrupt.install()
        let line = LoadProgressLine(enabled: !quiet, duration: runLength.seconds)
        let run: LoadRun
        do { run = try LoadRun(settings) } catch { throw CLIFailure.badInput("\(error)") }
        let outcome = await run.run(pipeline: pipeline, stop: { Interrupt.isRequested }, progress: { line.show($0) })
        line.finish()
        var metadata = ResultsBatch()
        metadata.runMetadata = [
            ("mode", "loadtest"), ("targets", targetList), ("tenant", setup.map { $0.createdTenant ?? "(the key's)" } ?? "(no sync target)"), ("model", Self.describe(model, connections.model)), ("seed", String(loaded.seed)),
            ("scenario_sha256", SHA256Hex.of(loaded.text)), ("build", BuildInfo.description), ("started_at", startedAt),
            ("wall_seconds", String(outcome.wallSeconds)), ("generator_cpu_percent", String(outcome.cpuPercentMean)),
            ("generator_cpu_percent_max", String(outcome.cpuPercentMax)), ("interrupted", outcome.interrupted ? "true" : "false"),
            ("peak_rss_bytes", WallClock.peakResidentBytes().map(String.init) ?? "unknown"),
        ]
        metadata.runMetadata.append(("started_at_unix_ms", String(outcome.startedAtUnixMilliseconds)))
        if let slice { metadata.runMetadata.append(("shard", slice.description)) }
        if let aborted = outcome.aborted { metadata.runMetadata.append(("aborted", "at \(aborted.seconds) s: \(aborted.threshold.message)")) }
        pipeline.submit(metadata)
        // The page stops before the file is finished: the last write takes the database out of
        // WAL mode, which a page being read at that moment would hold up.
        try? await livePage?.stop()
        do { try pipeline.finish() } catch { throw CLIFailure(message: "writing \(resultsPath) failed: \(error)", status: 1) }

        let results = try ResultsDatabase.open(at: resultsPath).load()
        let tenantNote = (setup?.createdTenant.map { " (tenant \($0), created for this run)" } ?? "")
            + (tlsOptions.insecure ? " (TLS certificates not checked: --insecure)" : "") + proxies.note(for: urls.values)
        try OutputPaths.write(Dashboard.render(results), to: dashboardPath)
        let summarized = LoadtestSummary(results: results, outcome: outcome, model: model, connections: connections.model,
                                         target: targetList + tenantNote, skipped: skipped, faults: loaded.faults,
                                         resultsPath: resultsPath, dashboardPath: dashboardPath)
        let summary = summarized.text
        print(summary)
        // A run a threshold aborted failed, whatever the rest of its data says.
        let passed = summarized.passed
        if let junit {
            var report = JUnitReport.run(results, wallSeconds: outcome.wallSeconds, timestamp: String(startedAt.prefix(19)), summary: summary)
            report.cases += [LoadtestSummary.junitCase(results)].compactMap { $0 }
            try OutputPaths.write(report.xml, to: junit)
        }
        if let json {
            let digest = try ResultsDigest.compute(ResultsDatabase.open(at: resultsPath))
            try OutputPaths.write(SummaryJSON.run(results, digest: digest, passed: passed, interrupted: outcome.interrupted).prettyText + "\n", to: json)
        }
        if outcome.interrupted { throw ExitCode(ExitStatus.interrupted) }
        if !passed { throw ExitCode(ExitStatus.checksFailed) }
    }

    /// Serves the dashboard of the results written so far on 127.0.0.1:`port` and prints
    /// where. The page reloads itself every 2 s until the run's end is in the results.
    static func serveDashboard(of resultsPath: String, port: Int, thresholds: [Threshold]) async throws -> LiveHost {
        let server = LivePageServer(summary: "live dashboard of this load test") {
            guard var results = try? ResultsDatabase.open(at: resultsPath).load() else { return nil }
            guard results.isRunning else { return Dashboard.render(results) }
            // The thresholds as they stand on the buckets written so far (the verdict is the
            // whole run's, at the end).
            results.thresholds = ThresholdEvaluator.evaluate(thresholds, recorder: results)
            // In progress: the time axis ends with the last bucket written, as far as the run
            // has got, rather than charting the buckets to come as zeros.
            let bucket = results.scenario.bucketNanoseconds
            let written = results.series.values.compactMap { $0.map(\.bucketStart).max() }.max()
            results.scenario.durationNanoseconds = min(results.scenario.durationNanoseconds, (written ?? 0) + bucket)
            return Dashboard.render(results).replacingOccurrences(of: "<head>", with: "<head><meta http-equiv=\"refresh\" content=\"2\">")
        }
        let host = LiveHost(configuration: .init(ports: [server.name: port], stopsOnSignals: false), servers: [server])
        let endpoints: [LiveEndpoint]
        do { endpoints = try await host.start() } catch { throw CLIFailure.badInput("--dashboard-port \(port): \(error)") }
        // Written at once, not buffered: whoever waits for the URL reads it before the run ends.
        FileHandle.standardOutput.write(Data("live dashboard  \(endpoints.first?.url ?? "?")/  (the results so far, refreshed every 2 s)\n".utf8))
        return host
    }

    /// The stacks a load test can drive.
    static let stacks = ["sync", "agent", "chat", "ai-bridge"]

    /// Metrics a load test records.
    static let liveMetrics: Set<String> = ["http.requests", "http.latency", "http.failures", "loadtest.iterations", "loadtest.start_lag",
                                           "loadtest.generator_cpu", "loadtest.busy_devices"]

    /// The thresholds a load test can judge, and the rest.
    static func liveThresholds(_ thresholds: [Threshold], stacks: Set<String>, metrics: Set<String>) -> (measured: [Threshold], skipped: [Threshold]) {
        var measured: [Threshold] = [], skipped: [Threshold] = []
        for threshold in thresholds {
            // Live phones run unplugged: nothing reports a battery to their engines.
            let live = metrics.contains(threshold.metric) && threshold.per.map { metrics.contains($0.metric) } ?? true
                && threshold.labels["stack"].map(stacks.contains) ?? true && threshold.per?.labels["stack"].map(stacks.contains) ?? true
                && threshold.labels["power_state"].map { $0 == PowerState.unplugged.description } ?? true
            if live { measured.append(threshold) } else { skipped.append(threshold) }
        }
        return (measured, skipped)
    }

    /// The workload the options ask for, and how long the run lasts (`--duration`, or the
    /// stages' total).
    func workload(urls: [String: String]) throws -> (WorkloadModel, TimeSpan) {
        let staged = try stages.map { text -> (stages: LoadStages, isRate: Bool) in
            guard let (stages, isRate) = LoadStages.parse(text), stages.total > .zero, stages.total <= .hours(24) else {
                throw CLIFailure.badInput("--stages \(text): expected DURATION:TARGET stages lasting more than 0 and at most 24h, like 30s:100,2m:100,30s:0 (phones) or 30s:200/s,1m:200/s (arrivals a second)")
            }
            guard duration == nil else { throw CLIFailure.badInput("--stages sets the run's length (\(stages.total)): leave out --duration") }
            guard rate == nil, ramp == nil else { throw CLIFailure.badInput("--stages replaces --rate and --ramp") }
            guard !appPaced else { throw CLIFailure.badInput("--stages and --app-paced do not combine: app-paced phones all run for the whole test") }
            if isRate {
                guard think == nil else { throw CLIFailure.badInput("--stages in arrivals a second is the open model; its pace is the stages, not --think") }
                guard stages.peak <= 1_000_000 else { throw CLIFailure.badInput("--stages: at most 1000000 arrivals a second") }
                return (stages, true)
            }
            guard self.devices == nil else { throw CLIFailure.badInput("--stages in phones sets the population (up to \(Int(stages.peak.rounded(.up)))): leave out --devices") }
            guard maxWait == nil else { throw CLIFailure.badInput("--max-wait is for the open model") }
            guard (1...100_000).contains(Int(stages.peak.rounded(.up))) else { throw CLIFailure.badInput("--stages: between 1 and 100000 phones at the peak") }
            return (stages, false)
        }
        let devices = self.devices ?? 50
        if let (stages, isRate) = staged {
            let model: WorkloadModel = isRate ? .open(ArrivalSchedule(rates: stages), devices: devices, maxWait: maxWait?.span ?? .seconds(5))
                : .staged(stages, thinkTime: think?.span ?? .seconds(1))
            return (model, stages.total)
        }
        guard let runLength = duration?.span else { throw CLIFailure.badInput("a load test needs a bounded length: --duration (e.g. 60s) or --stages") }
        if let rate {
            let number = rate.hasSuffix("/s") ? String(rate.dropLast(2)) : rate
            guard let perSecond = Double(number), perSecond > 0, perSecond <= 1_000_000 else {
                throw CLIFailure.badInput("--rate \(rate): expected iterations per second, like 200 or 200/s")
            }
            guard think == nil, !appPaced else { throw CLIFailure.badInput("--think and --app-paced are for the closed model; the open model's pace is --rate") }
            return (.open(ArrivalSchedule(rate: perSecond, ramp: ramp?.span ?? .zero), devices: devices, maxWait: maxWait?.span ?? .seconds(5)), runLength)
        }
        guard ramp == nil, maxWait == nil else { throw CLIFailure.badInput("--ramp and --max-wait are for the open model (--rate)") }
        guard !(appPaced && think != nil) else { throw CLIFailure.badInput("--app-paced phones wait as the app does; leave out --think") }
        guard !appPaced || urls.keys.sorted() == ["sync"] else { throw CLIFailure.badInput("--app-paced paces the sync stack: --target sync=URL alone") }
        return (appPaced ? .app(devices: devices) : .closed(devices: devices, thinkTime: think?.span ?? .seconds(1)), runLength)
    }

    /// The model and whose connections its requests go on, as the summary and the run's
    /// metadata say it.
    static func describe(_ model: WorkloadModel, _ connections: ConnectionModel) -> String {
        switch connections {
        case .perPhone: return describe(model) + "; a keep-alive connection per phone"
        case .shared: return describe(model) + "; one pool of connections for every phone (--connections shared)"
        }
    }

    static func describe(_ model: WorkloadModel) -> String {
        switch model {
        case .closed(let devices, let think): return "closed: \(devices) phones, think \(think)"
        case .staged(let stages, let think, nil): return "closed: up to \(model.devices) phones in stages \(stages), think \(think)"
        case .staged(let stages, let think, let shard?):
            return "closed: up to \(model.devices) phones in stages \(stages) (shard \(shard): phones \(shard.index), \(shard.index + shard.count), \(shard.index + 2 * shard.count), …), think \(think)"
        case .app(let devices): return "closed: \(devices) phones paced as the app (engine ticks, syncs when due)"
        case .open(let schedule, let devices, let maxWait):
            return "open: \(schedule), pool of \(devices) phones, waits up to \(maxWait)"
        }
    }

    /// The scenario row, marked as a live run: its origin is the wall-clock time of day.
    static func openingBatch(_ scenario: Scenario, model: WorkloadModel, duration: TimeSpan, bucket: TimeSpan, stacks: [String]) -> ResultsBatch {
        var batch = ResultsBatch()
        let now = Date().timeIntervalSince1970
        let timeOfDay = Int64((now.truncatingRemainder(dividingBy: 86_400)) * 1e9)
        batch.scenario = ScenarioRow(name: scenario.name, text: scenario.text, sha256: SHA256Hex.of(scenario.text), seed: scenario.seed,
                                     startTimeOfDay: timeOfDay, durationNanoseconds: duration.nanoseconds, bucketNanoseconds: bucket.nanoseconds,
                                     devices: model.devices, tickMode: "live")
        batch.deviceClasses = [DeviceClassRow(id: 0, name: "loadtest", count: model.devices, firstDevice: 0,
                                              parameters: (["model": .string(describe(model)), "stacks": .array(stacks.map { .string($0) })] as JSONValue).canonicalText)]
        return batch
    }
}
