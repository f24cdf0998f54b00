import AgentRuntimeWire
import Foundation
public import LabKernel
public import LabStore
public import Live
import NIOCore
import NIOPosix
public import Simulator
import Synchronization

/// Whose keep-alive connections a load test's requests go on.
public enum ConnectionModel: String, Sendable, CaseIterable {
    /// Each phone its own, as a phone's app has and as k6's virtual users and Locust's
    /// users do: the server holds a connection for every phone that has sent a request.
    case perPhone = "phone"
    /// One pool for all: a connection for each request in flight at once, the fewest the
    /// load can go on.
    case shared
}

/// A load test on the wall clock: virtual phones drive a real server through the same
/// client cores the simulator runs, under a closed or open workload (`WorkloadModel`),
/// recording into the same results database as a simulation.
///
/// Theory of operation. In the closed model each phone is one task that sleeps until its
/// next intended start, runs an iteration and plans the next after a think time. In the
/// open model one task walks the arrival schedule and hands each arrival to an idle phone
/// in a task of its own (or counts it dropped). Tasks only wait on sockets and timers; the
/// NIO event loops do the I/O, so thousands of phones share a handful of threads. A ticker
/// closes a results bucket every `bucket` (with the generator's CPU share over it) and
/// reports progress every second. When the duration is over or `stop` says so, no new
/// iteration starts; those in flight end within their request deadline.
public final class LoadRun: Sendable {
    public struct Settings: Sendable {
        public var scenario: Scenario
        public var model: WorkloadModel
        public var duration: TimeSpan
        public var bucket: TimeSpan
        /// The sync server and its key (nil: sync is not a target).
        public var sync: (url: String, apiKey: String)?
        /// The agent runtime and the token its phones chat with (nil: not a target; a nil
        /// token: a runtime without auth, chatted with as app `loadtest`).
        public var agent: (url: String, token: String?)?
        /// The chat server (nil: not a target). Its phones register users of their own.
        public var chat: String?
        /// The chance that a chat or sync phone's app is killed after an iteration (its next
        /// one launches it again: chat's session restored and caught up before it sends,
        /// sync's engine restored from its store before it syncs).
        public var relaunchShare: Ratio = .zero
        /// The AI bridge relay (nil: not a target). Each phone brings its desktop: a daemon
        /// in the generator that dials the relay, and the phone pairs with it.
        public var aiBridge: String?
        public var requestTimeout: Duration = .seconds(10)
        /// Whose certificates an `https://` target's are checked against.
        public var tls = ClientTLS.system
        /// Which targets are reached through a forward proxy.
        public var proxies = ProxyRoutes.direct
        /// Event-loop threads the phones run on (`defaultLoops` unless set).
        public var loops = LoadRun.defaultLoops
        /// Whose keep-alive connections a phone's requests go on (`--connections`).
        public var connections = ConnectionModel.perPhone
        /// Distinguishes this run's phones on a server that kept earlier runs' devices.
        public var runTag: String

        public init(scenario: Scenario, model: WorkloadModel, duration: TimeSpan, bucket: TimeSpan, sync: (url: String, apiKey: String)?,
                    agent: (url: String, token: String?)? = nil, runTag: String) {
            self.scenario = scenario
            self.model = model
            self.duration = duration
            self.bucket = bucket
            self.sync = sync
            self.agent = agent
            self.runTag = runTag
        }
    }

    public struct Progress: Sendable {
        public var elapsed: Double
        public var requests: Int
        public var errors: Int
        /// Of the requests answered since the last report (nil: none).
        public var p99: UInt64?
        public var cpuPercent: Double
    }

    public struct Outcome: Sendable {
        public var wallSeconds: Double
        /// When the clock started, on the wall clock (Unix milliseconds): where a merge of
        /// several generators' results lines their buckets up.
        public var startedAtUnixMilliseconds: Int64 = 0
        public var interrupted: Bool
        /// A threshold with `abortOnFail` that the run passed, and when (seconds in): the run
        /// stopped there.
        public var aborted: (seconds: Double, threshold: ThresholdResultRow)?
        public var cpuPercentMean: Double
        public var cpuPercentMax: Double
        /// The event-loop threads the phones ran on, and the share of all cores the run's work
        /// can use: the loops' share, or every core when the AI bridge's desktops also worked
        /// (their tunnels and timers run on threads of their own, off the loops).
        public var loops: Int
        public var desktopsOffLoops = false
        public var loopCapacityPercent: Double {
            desktopsOffLoops ? 100 : min(100, Double(loops) / Double(max(1, ProcessInfo.processInfo.activeProcessorCount)) * 100)
        }
        public var thresholds: [ThresholdResultRow]

        /// Every threshold held and none stopped the run early: what sets the exit code.
        public var passed: Bool { thresholds.allSatisfy(\.passed) && aborted == nil }
    }

    public let settings: Settings
    let recorder: LoadRecorder
    /// Device `i`'s phone of each targeted stack (an empty list: not a target).
    let syncPhones: [SyncPhone]
    let agentPhones: [AgentLoadPhone]
    let chatPhones: [ChatLoadPhone]
    let bridgePhones: [BridgeLoadPhone]
    /// Which chat phones share which groups.
    let chatGroups: ChatGroupPlan
    /// One executor per event loop of the run's group; phone `i` runs on `i % count`.
    let executors: [EventLoopTaskExecutor]
    /// The run's own event loops: every phone's sockets, timers and tasks.
    let group: MultiThreadedEventLoopGroup
    /// The phones' HTTP clients: one each, or one they share (`Settings.connections`).
    let clients: [HTTPClient]

    /// A run's tag, in its tenant, device ids and usernames: the start's milliseconds in base
    /// 36 and six random base-36 digits, so runs started in the same millisecond (a job's
    /// generators started together, two terminals) still get ids of their own: a hundred
    /// generators at once collide once in about 400,000 jobs (four digits: once in 340).
    public static func runTag(startingAt unixMilliseconds: UInt64) -> String {
        let space: UInt64 = 2_176_782_336  // 36⁶
        let digits = String(UInt64.random(in: 0..<space) + space, radix: 36).dropFirst()  // six digits, leading zeros kept
        return String(unixMilliseconds, radix: 36) + digits
    }

    /// Half the cores, at least one. A phone spends most of its time waiting, so a loop
    /// thread that is busier handles more events per wake-up: on this 2-core machine one
    /// loop sent the same load as two for 20 % less CPU. The other half is left to the
    /// kernel's network stack and, on loopback, to the server under test. `--loops` sets it
    /// when the summary says the generator is the bottleneck.
    public static var defaultLoops: Int { max(1, ProcessInfo.processInfo.activeProcessorCount / 2) }

    /// Throws when a target's phones cannot be made (a chat server URL without a port).
    public init(_ settings: Settings) throws {
        self.settings = settings
        let recorder = LoadRecorder()
        self.recorder = recorder
        let group = MultiThreadedEventLoopGroup(numberOfThreads: max(1, settings.loops))
        self.group = group
        let clients = switch settings.connections {
        case .perPhone: (0..<settings.model.devices).map { _ in HTTPClient(group: group, idlePerHost: 1, tls: settings.tls, proxies: settings.proxies) }
        case .shared: [HTTPClient(group: group, idlePerHost: max(8, settings.model.devices), tls: settings.tls, proxies: settings.proxies)]
        }
        self.clients = clients
        // Phone `index`'s client, which each of its stacks uses, as one app's requests share
        // its HTTP session.
        func http(_ index: Int) -> HTTPClient { clients[clients.count == 1 ? 0 : index] }
        let sequences = (settings.scenario.workflows?.workloads ?? []).map { ($0.sequenceName, $0.sequenceJSON) }
        // The run's tag in every phone's stream: a server keeps what earlier runs sent (the
        // agent runtime answers a repeated `client_request_id` with that chat, long ended),
        // so each run's ids must be its own, as its device ids and usernames are.
        let root = StreamSeed(settings.scenario.seed).child("loadtest").child(settings.runTag)
        syncPhones = settings.sync.map { sync in
            (0..<settings.model.devices).map { index in
                var draw = root.child(UInt64(index)).generator()
                return SyncPhone(baseURL: sync.url, apiKey: sync.apiKey, deviceID: "loadtest-\(settings.runTag)-\(index)",
                                 seed: draw.next(), http: http(index), requestTimeout: settings.requestTimeout, sequences: sequences,
                                 relaunchShare: settings.relaunchShare)
            }
        } ?? []
        agentPhones = settings.agent.map { agent in
            let identity = agent.token.flatMap(AgentIdentity.init(token:)) ?? AgentIdentity(appID: "loadtest", userID: "loadtest-\(settings.runTag)")
            let mix = (settings.scenario.agent?.mix ?? []).map { (name: $0.workflow.name, weight: $0.weight) }
            return (0..<settings.model.devices).map { index in
                AgentLoadPhone(base: agent.url, identity: identity, http: http(index), mix: mix, inputsPerChat: settings.scenario.agent?.inputsPerChat ?? 2,
                               seed: root.child(UInt64(index)).child("agent"), requestTimeout: settings.requestTimeout)
            }
        } ?? []
        let board = DeliveryBoard(recorder: recorder)
        chatPhones = try settings.chat.map { base in
            try (0..<settings.model.devices).map { index in
                try ChatLoadPhone(index: index, base: base, runTag: settings.runTag, seed: root.child(UInt64(index)).child("chat"), http: http(index),
                                  requestTimeout: settings.requestTimeout, board: board, recorder: recorder, relaunchShare: settings.relaunchShare)
            }
        } ?? []
        bridgePhones = try settings.aiBridge.map { relay in
            try (0..<settings.model.devices).map { index in
                try BridgeLoadPhone(index: index, relay: relay, runTag: settings.runTag, seed: root.child(UInt64(index)).child("ai-bridge"),
                                    settings: settings.scenario.bridge ?? BridgeSettings(), http: http(index), requestTimeout: settings.requestTimeout, recorder: recorder)
            }
        } ?? []
        let chatDevices = settings.scenario.devices.filter { settings.scenario.stacks(of: $0).contains(.chat) }.reduce(0) { $0 + $1.count }
        chatGroups = ChatGroupPlan(chat: settings.scenario.chat, scenarioPhones: chatDevices, phones: chatPhones.count, seed: root.child("chat-groups"))
        executors = group.makeIterator().map { EventLoopTaskExecutor($0) }
    }

    /// Runs to the end of the duration or until `stop()`; writes every bucket to `pipeline`.
    public func run(pipeline: ResultsPipeline, stop: @escaping @Sendable () -> Bool,
                    progress: @escaping @Sendable (Progress) -> Void) async -> Outcome {
        let clock = ContinuousClock()
        await Self.cancelling(when: stop) { [chatPhones, chatGroups, bridgePhones, settings] in
            // Chat users and their groups exist before the clock starts: a phone's readers must
            // be able to receive its first message. Registration is recorded like any request.
            await withDiscardingTaskGroup { group in
                for phone in chatPhones { group.addTask { _ = await phone.register(clock: clock) } }
            }
            await ChatLoadPhone.openChannels(chatGroups, phones: chatPhones, runTag: settings.runTag, clock: clock)
            // Every AI bridge phone is paired with its desktop before the clock starts, as its
            // user did once, long before.
            await withDiscardingTaskGroup { group in
                for phone in bridgePhones { group.addTask { _ = await phone.pair(clock: clock) } }
            }
        }
        let start = clock.now
        let startedAt = Int64((Date().timeIntervalSince1970 * 1000).rounded())
        let end = start + .nanoseconds(settings.duration.nanoseconds)
        let cpu = CPUMeter()
        let shared = RunShared()
        let shouldStop: @Sendable () -> Bool = { stop() || shared.finished.withLock { $0 } || shared.aborted.withLock { $0 != nil } }

        await withDiscardingTaskGroup { group in
            // The ticker: progress every second, a results bucket every `bucket`.
            group.addTask { [recorder, settings, shared] in
                var bucketStart: Int64 = 0
                var lastProgress = start
                var bucketCPU = CPUMeter()
                while true {
                    try? await clock.sleep(until: min(lastProgress + .seconds(1), end), tolerance: .milliseconds(5))
                    let now = clock.now
                    let elapsed = (now - start).nanoseconds
                    if now < end, let crossed = recorder.crossed(settings.scenario.thresholds, elapsed: TimeSpan(nanoseconds: elapsed)) {
                        shared.aborted.withLock { $0 = (Double(elapsed) / 1e9, crossed) }
                    }
                    if now >= end || shouldStop() {
                        // The last bucket stays open: iterations in flight finish into it.
                        shared.lastBucket.withLock { $0 = (bucketStart, bucketCPU) }
                        shared.finished.withLock { $0 = true }
                        return
                    }
                    if elapsed - bucketStart >= settings.bucket.nanoseconds {
                        let share = bucketCPU.percentSinceLast()
                        shared.cpuSamples.withLock { $0.append(share) }
                        let bucketEnd = Double(bucketStart + settings.bucket.nanoseconds) / 1e9
                        pipeline.submit(recorder.closeBucket(startingAt: bucketStart, cpuPercent: share, load: settings.model.load(at: bucketEnd)))
                        bucketStart += settings.bucket.nanoseconds
                    }
                    let figures = recorder.takeProgress()
                    progress(Progress(elapsed: Double(elapsed) / 1e9, requests: figures.requests, errors: figures.errors, p99: figures.p99,
                                      cpuPercent: cpu.percentOverall()))
                    lastProgress = now
                }
            }
            switch settings.model {
            case .closed(_, let think), .staged(_, let think, _):
                let stages: LoadStages? = if case .staged(let stages, _, _) = settings.model { stages } else { nil }
                let devices = settings.model.devices
                for index in 0..<devices {
                    group.addTask(executorPreference: executors[index % executors.count]) { [self, settings, executors] in
                        var thinkTime = ThinkTime(mean: think, seed: StreamSeed(settings.scenario.seed).child("think").child(UInt64(index)))
                        // Phones start spread over one think time, not all in the first
                        // millisecond; staged, each when the stages first call for it.
                        let spread = start + .nanoseconds(think.nanoseconds * Int64(index) / Int64(max(1, devices)))
                        let number = settings.model.phoneNumber(index)
                        var next: ContinuousClock.Instant? = stages.map { Self.turn(of: number, in: $0, atOrAfter: start, start: start) } ?? spread
                        let executor = executors[index % executors.count]
                        while let intended = next, intended < end && !shouldStop() {
                            guard await Self.wait(until: intended, on: executor, clock: clock, stopping: shouldStop) else { return }
                            _ = await self.iterate(index, intended: intended, clock: clock)
                            let after = clock.now + .nanoseconds(thinkTime.next().nanoseconds)
                            next = stages.map { Self.turn(of: number, in: $0, atOrAfter: after, start: start) } ?? after
                        }
                    }
                }
            case .app(let devices):
                for index in 0..<devices {
                    group.addTask(executorPreference: executors[index % executors.count]) { [syncPhones, recorder, executors] in
                        let phone = syncPhones[index], executor = executors[index % executors.count]
                        // Phones start spread over their first tick interval.
                        var due = start + .nanoseconds(phone.tickInterval.nanoseconds * Int64(index) / Int64(max(1, devices)))
                        var lastSync: ContinuousClock.Instant?
                        while due < end && !shouldStop() {
                            guard await Self.wait(until: due, on: executor, clock: clock, stopping: shouldStop) else { return }
                            let began = clock.now
                            let intended = due
                            let outcome = await phone.tick { endpoint, failure in
                                recorder.request(endpoint, latency: clock.now - intended, failure: failure)
                            }
                            if let ok = outcome {
                                recorder.iterationStarted(lag: began - intended)
                                recorder.iterationEnded(ok: ok)
                                if ok, let last = lastSync { recorder.syncInterval(began - last, powerState: phone.powerState) }
                                if ok { lastSync = began }
                            }
                            // The next tick one interval on; a phone that fell behind skips to now.
                            due = max(due + .nanoseconds(phone.tickInterval.nanoseconds), clock.now)
                        }
                    }
                }
            case .open(let schedule, _, let maxWait):
                let pool = PhonePool(phones: settings.model.devices, limit: Int(schedule.rates.peak * maxWait.seconds) + 1,
                                     maxWait: .nanoseconds(maxWait.nanoseconds))
                var arrival = 1
                // Every arrival of the schedule is run, or counted dropped: one the generator
                // reaches only after the end (it fell behind) never started, and counts. A run
                // a threshold aborted ends there: what was not yet due never arrived.
                while !stop() && shared.aborted.withLock({ $0 == nil }) {
                    let offset = schedule.offset(ofArrival: arrival)
                    guard offset.isFinite, offset < settings.duration.seconds else { break }
                    let intended = start + .nanoseconds(Int64(offset * 1e9))
                    arrival += 1
                    guard clock.now < end else {
                        recorder.dropped()
                        continue
                    }
                    try? await clock.sleep(until: intended, tolerance: .milliseconds(1))
                    guard !stop() && shared.aborted.withLock({ $0 == nil }) else { break }
                    switch pool.arrive(at: intended) {
                    case .drop: recorder.dropped()
                    case .wait: break
                    case .run(let index):
                        group.addTask(executorPreference: executors[index % executors.count]) { [self] in
                            var next: ContinuousClock.Instant? = intended
                            var waited = false
                            while let due = next {
                                _ = await self.iterate(index, intended: due, waited: waited, clock: clock)
                                waited = true
                                let (following, expired) = pool.next(for: index, now: clock.now, stopping: shouldStop())
                                for _ in 0..<expired { recorder.dropped() }
                                next = following
                            }
                        }
                    }
                }
                shared.finished.withLock { $0 = true }
                for _ in 0..<pool.drain() { recorder.dropped() }
            }
        }
        if let (bucketStart, bucketCPU) = shared.lastBucket.withLock({ $0 }) {
            var meter = bucketCPU
            let share = meter.percentSinceLast()
            shared.cpuSamples.withLock { $0.append(share) }
            let lastEnd = min(Double(bucketStart + settings.bucket.nanoseconds), Double(settings.duration.nanoseconds)) / 1e9
            pipeline.submit(recorder.closeBucket(startingAt: bucketStart, cpuPercent: share, load: settings.model.load(at: lastEnd)))
        }
        let wall = Double((clock.now - start).nanoseconds) / 1e9
        let shares = shared.cpuSamples.withLock { $0 }
        var outcome = Outcome(wallSeconds: wall, interrupted: stop(), aborted: shared.aborted.withLock { $0 }, cpuPercentMean: cpu.percentOverall(),
                              cpuPercentMax: shares.max() ?? 0, loops: executors.count, thresholds: [])
        outcome.startedAtUnixMilliseconds = startedAt
        outcome.desktopsOffLoops = !bridgePhones.isEmpty
        let last = recorder.finish(thresholds: settings.scenario.thresholds)
        outcome.thresholds = last.thresholds
        pipeline.submit(last)
        for phone in chatPhones { await phone.phone.stop() }
        for phone in bridgePhones { await phone.stop() }
        for client in clients { client.shutdown() }
        try? await group.shutdownGracefully()
        return outcome
    }

    /// Runs `setUp`, cancelled as soon as `stop()` turns true (looked at every 50 ms): a
    /// Ctrl-C while phones register or pair ends their waits instead of the deadlines.
    static func cancelling(when stop: @escaping @Sendable () -> Bool, _ setUp: @escaping @Sendable () async -> Void) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await setUp() }
            group.addTask {
                while !stop() && !Task.isCancelled { try? await Task.sleep(for: .milliseconds(50)) }
            }
            await group.next()
            group.cancelAll()
        }
    }

    /// Sleeps on `executor` until `instant`; false when the run stopped meanwhile. A long
    /// wait (a staged phone's turn, an app-paced phone's tick) looks up every quarter
    /// second, so a run that stops (Ctrl-C, an aborting threshold) ends at once.
    static func wait(until instant: ContinuousClock.Instant, on executor: EventLoopTaskExecutor, clock: ContinuousClock,
                     stopping: () -> Bool) async -> Bool {
        while clock.now + .milliseconds(250) < instant {
            guard !stopping() else { return false }
            await executor.sleep(until: clock.now + .milliseconds(250), clock: clock)
        }
        await executor.sleep(until: instant, clock: clock)
        return !stopping()
    }

    /// When phone `index` of a staged run may next start an iteration, at or after `t`: the
    /// first moment the stages call for more than `index` phones (nil: never again).
    static func turn(of index: Int, in stages: LoadStages, atOrAfter t: ContinuousClock.Instant,
                     start: ContinuousClock.Instant) -> ContinuousClock.Instant? {
        let seconds = Double((t - start).nanoseconds) / 1e9
        return stages.firstAbove(Double(index), atOrAfter: seconds).map { start + .nanoseconds(Int64(($0 * 1e9).rounded(.up))) }
    }

    /// Runs one iteration of device `index` meant to start at `intended`: a sync, then an
    /// agent chat, then a chat message, then an AI bridge prompt, for the stacks that are
    /// targets; latency counts
    /// from then. `waited`: it waited for an idle phone (the open model's backlog), so its
    /// late start is the system's saturation, not the generator's lag.
    func iterate(_ index: Int, intended: ContinuousClock.Instant, waited: Bool = false, clock: ContinuousClock) async -> Bool {
        recorder.iterationStarted(lag: waited ? nil : clock.now - intended)
        // The first step counts from the intended start (no coordinated omission); a later
        // step from when it began, so one stack's time is not charged to the next.
        var ok = true, stepped = false
        if !syncPhones.isEmpty {
            ok = await syncPhones[index].iterate(record: { [recorder] endpoint, failure in
                recorder.request(endpoint, latency: clock.now - intended, failure: failure)
            }, relaunched: { [recorder] took in recorder.relaunched(took, stack: "sync") })
            stepped = true
        }
        if !agentPhones.isEmpty {
            ok = await agentPhones[index].iterate(intended: stepped ? clock.now : intended, clock: clock, recorder: recorder) && ok
            stepped = true
        }
        if chatPhones.count >= 2 {
            let partner = ChatLoadPhone.partner(of: index, count: chatPhones.count)
            ok = await chatPhones[index].iterate(partner: chatPhones[partner], phones: chatPhones, plan: chatGroups,
                                                 intended: stepped ? clock.now : intended, clock: clock) && ok
            stepped = true
        }
        if !bridgePhones.isEmpty {
            ok = await bridgePhones[index].iterate(intended: stepped ? clock.now : intended, clock: clock) && ok
        }
        recorder.iterationEnded(ok: ok)
        return ok
    }
}

/// What the run's tasks share: whether the run is over, and the CPU share of each bucket.
final class RunShared: Sendable {
    let finished = Mutex(false)
    /// The bucket open when the run's time was up, closed once the iterations in flight end.
    let lastBucket = Mutex<(start: Int64, cpu: CPUMeter)?>(nil)
    let cpuSamples = Mutex<[Double]>([])
    /// The threshold that stopped the run early (`abortOnFail`), and when.
    let aborted = Mutex<(seconds: Double, threshold: ThresholdResultRow)?>(nil)
}

/// The process's CPU time (user and system, every thread) against the wall clock, as a
/// share of all cores: near 100 % the generator, not the server, sets the pace.
struct CPUMeter: Sendable {
    let cores = Double(max(1, ProcessInfo.processInfo.activeProcessorCount))
    let startCPU = CPUMeter.cpuSeconds()
    let startWall = Date()
    var lastCPU = CPUMeter.cpuSeconds()
    var lastWall = Date()

    static func cpuSeconds() -> Double { WallClock.cpuSeconds() }

    func percentOverall() -> Double {
        let wall = Date().timeIntervalSince(startWall)
        return wall > 0 ? (Self.cpuSeconds() - startCPU) / wall / cores * 100 : 0
    }

    mutating func percentSinceLast() -> Double {
        let cpu = Self.cpuSeconds(), now = Date()
        defer { lastCPU = cpu; lastWall = now }
        let wall = now.timeIntervalSince(lastWall)
        return wall > 0 ? (cpu - lastCPU) / wall / cores * 100 : 0
    }
}
