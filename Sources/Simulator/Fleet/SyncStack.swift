import DeviceWorkflows
import Orch8Wire
public import LabKernel
import MobileSyncServer
import ServerStorage

/// The sync stack of the fleet: each engine's `SyncClient` and the real `SyncServer` core
/// behind a worker-pool service-time model, the virtual network between them, the
/// operator who resolves approvals, and the push service.
///
/// Theory of operation. When a device's client is due on a tick, its request crosses the
/// network to the server; if a worker is free it is served at once, otherwise it waits in
/// a FIFO queue (beyond `queueLimit` it is refused with 503 and Retry-After). Serving
/// takes a time drawn from `serviceTime`; only when it ends does the core handle the
/// request (so its state changes at completion), and the response crosses the network
/// back. A crash drops the queue and everything in service (their devices time out) and
/// refuses arrivals until the restart; the state survives. Approvals the core creates go
/// to the operator, who resolves each after a think time; the resulting command is
/// announced by a silent push when the device has a push token, unless pushes are down
/// or lost. The engines (and so each device's client and outbox) are the workflow
/// stack's: every method that reaches a device takes it.
public struct SyncStack {
    public enum Event: Sendable {
        /// A sync message crossed the virtual network.
        case net(slot: UInt32)
        /// A server worker finished a request (void if the server crashed since `epoch`).
        case serviceDone(token: UInt32, epoch: UInt32)
        case timeout(token: UInt32)
        /// The operator resolves an approval on the dashboard.
        case operatorResolve(task: UInt32)
        case campaign(index: UInt16)
    }

    enum Message {
        case request(UInt32)
        case response(UInt32)
    }

    /// A request from send to answer.
    struct Exchange {
        var device: Int32
        var launch: UInt64
        var request: SyncRequest
        var sent: SentBatch
        var startedAt: Instant
        var arrivedAt: Instant?
        var outcome: Result<SyncResponse, SyncServerRefusal>?
        /// Whether the request carried the whole outbox, and the newest entry it carried.
        var complete: Bool
        var maxSeq: Int64
        var finished = false
        /// The request or its answer found no route: the client learns it at its timeout,
        /// which counts the request as `unreachable` rather than `timeout` (one outcome a
        /// request).
        var unreachable = false
    }

    let settings: SyncSettings
    let metrics: SyncMetrics
    let ids: SyncInvariants
    let root: StreamSeed
    var server: SyncServer
    /// Where the server sets finished rows aside (nil: they stay in memory).
    var archive: SQLiteSyncArchive?
    /// Why the archive stopped taking rows (the run cannot be trusted past it).
    var archiveFailure: String? { archive?.failure }
    /// The server's capacity model in front of the core.
    var pool: WorkerPool
    var network: VirtualNetwork<Message>
    let serverEndpoint: EndpointID
    /// Endpoint of each device, by device index.
    var endpoints: [EndpointID]
    var exchanges: [UInt32: Exchange] = [:]
    var nextToken: UInt32 = 0
    /// The operator's decisions: a stream of their own.
    var operatorGenerator: SeededGenerator
    /// Each device's name on the server, and back.
    let deviceIDs: [String]
    let deviceOfID: [String: Int]
    /// When each command was created and whether a push announced it.
    var commandCreated: [String: (at: Instant, pushed: Bool)] = [:]
    /// complete_step commands: the gate they resolve, for the approval round trip.
    var commandGate: [String: String] = [:]
    var appliedCommands: Set<String> = []
    var operatorTasks: [UInt32: (approval: String, value: String)] = [:]
    var nextOperatorTask: UInt32 = 0

    /// The sync endpoint, as `http.latency` names it.
    static let endpoint = "POST /api/v1/mobile/sync"

    /// The server, its network and the devices' registrations, at the start of a run.
    init(_ settings: SyncSettings, fleet: inout Fleet, workflows: inout WorkflowStack) {
        self.settings = settings
        metrics = SyncMetrics(recorder: &fleet.recorder)
        ids = SyncInvariants(ledger: &fleet.invariants)
        root = fleet.root
        let seed = fleet.root.child(.server)
        var config = SyncServerConfig()
        config.idleIntervalSecs = Int(settings.idleInterval.nanoseconds / 1_000_000_000)
        config.activeIntervalSecs = Int(settings.activeInterval.nanoseconds / 1_000_000_000)
        config.keepsStatusTexts = false
        config.retention = settings.retention
        var server = SyncServer(config: config, seed: seed.child("core"), wallClock: fleet.engineClock)
        server.bootstrap(now: .zero)
        // Without a temporary file the rows stay in memory: the same run, larger.
        if settings.setsHistoryAside, let archive = try? SQLiteSyncArchive() {
            server.state.setAside(into: archive)
            self.archive = archive
        }
        var network = VirtualNetwork<Message>(profiles: fleet.scenario.links.profiles, seed: fleet.root.child(.network).child("sync"))
        var endpoints: [EndpointID] = []
        deviceIDs = fleet.devices.indices.map(fleet.deviceName)
        deviceOfID = Dictionary(uniqueKeysWithValues: deviceIDs.enumerated().map { ($1, $0) })
        for index in fleet.devices.indices {
            let endpoint = network.addEndpoint(access: fleet.devices[index].network == .wifi ? .wifi : .cellular,
                                               stream: fleet.deviceSeed(index).child("sync-link"))
            if fleet.devices[index].network == .offline { network.setOffline(true, for: endpoint) }
            endpoints.append(endpoint)
            guard let slot = workflows.engines[index], slot.syncing else { continue }
            slot.pushToken = fleet.push.hasToken(index, fleetSeed: fleet.deviceSeed(index))
            server.register(device: deviceIDs[index], platform: "ios", pushToken: slot.pushToken ? "push-\(deviceIDs[index])" : nil,
                            tenant: settings.tenant, now: .zero)
        }
        serverEndpoint = network.addEndpoint(access: .datacenter, isServer: true)
        self.server = server
        self.network = network
        self.endpoints = endpoints
        pool = WorkerPool(settings.server, seed: seed.child("service"))
        operatorGenerator = seed.child("operator").generator()
    }

    func scheduleCampaigns(into queue: inout EventQueue<FleetWorld.Event>) {
        for (index, campaign) in settings.campaigns.enumerated() {
            queue.schedule(.sync(.campaign(index: UInt16(index))), at: .zero + campaign.at)
        }
    }

    mutating func handle(_ event: Event, fleet: inout Fleet, workflows: inout WorkflowStack, now: Instant,
                         queue: inout EventQueue<FleetWorld.Event>) {
        switch event {
        case .net(let slot):
            guard let delivered = network.deliver(slot: slot, at: now) else { return }
            switch delivered.message {
            case .request(let token): serverReceived(token, fleet: &fleet, now: now, queue: &queue)
            case .response(let token): deviceReceived(token, fleet: &fleet, workflows: &workflows, now: now, queue: &queue)
            }
        case .serviceDone(let token, let epoch): serviceDone(token, epoch: epoch, fleet: &fleet, now: now, queue: &queue)
        case .timeout(let token): timedOut(token, fleet: &fleet, workflows: workflows, now: now, queue: &queue)
        case .operatorResolve(let task): operatorResolves(task, fleet: &fleet, now: now, queue: &queue)
        case .campaign(let index): runCampaign(Int(index), fleet: &fleet, workflows: workflows, now: now, queue: &queue)
        }
    }

    mutating func token() -> UInt32 {
        nextToken &+= 1
        return nextToken
    }


    // MARK: The phone and the network

    /// The device's network changed: its endpoint follows (offline drops its traffic).
    mutating func networkChanged(_ device: Int, to state: NetworkState) {
        let endpoint = endpoints[device]
        switch state {
        case .offline: network.setOffline(true, for: endpoint)
        case .wifi:
            network.setOffline(false, for: endpoint)
            network.setAccess(.wifi, for: endpoint)
        case .cellular:
            network.setOffline(false, for: endpoint)
            network.setAccess(.cellular, for: endpoint)
        }
    }

    /// A routing partition between these devices and the server, for a while.
    mutating func partition(_ devices: Set<EndpointID>, from: Instant, until: Instant) {
        network.addPartition(.init(groupA: devices, groupB: [serverEndpoint], from: from, until: until))
    }

    // MARK: Buckets and the run's end

    mutating func closeBucket(fleet: inout Fleet, workflows: WorkflowStack, start: Int64, now: Instant) {
        fleet.recorder.set(metrics.outboxDepth, Double(workflows.engines.reduce(0) { $0 + ((try? $1?.store.outboxCount()) ?? 0) }))
        fleet.recorder.set(metrics.utilisation, pool.utilisation(bucketStart: start, now: now))
        fleet.recorder.set(metrics.queueLength, Double(pool.queueLength))
    }

    /// No approval lost: every gate waiting on a device whose outbox has drained is known
    /// to the server (pending, resolved or expired).
    func finish(fleet: inout Fleet, workflows: WorkflowStack) {
        for device in workflows.engines.indices {
            guard let slot = workflows.engines[device], slot.isRunning, (try? slot.store.outboxCount()) == 0 else { continue }
            for (instanceID, step) in slot.waitingSteps() {
                guard let sequence = slot.instanceFacts(instanceID)?.sequence,
                      !workflows.catalog.answeredOnDevice(sequence: sequence, step: step) else { continue }
                let known = server.state.approval(device: deviceIDs[device], instance: instanceID, block: step) != nil
                fleet.invariants.check(ids.noLostApprovals, known, "device \(device): \(instanceID) waits at \(step) but the server has no approval for it")
            }
        }
    }
}

/// Metric handles of the sync stack.
struct SyncMetrics {
    enum RequestOutcome: Int, MetricLabel {
        case ok, refused, timeout, unreachable
        var label: String { ["ok", "refused", "timeout", "unreachable"][rawValue] }
    }

    enum CommandOutcome: Int, MetricLabel {
        case applied, duplicate, refused, deferred
        var label: String { ["applied", "duplicate", "refused", "deferred"][rawValue] }
    }

    enum Pushed: Int, MetricLabel {
        case yes, no
        var label: String { ["yes", "no"][rawValue] }
    }

    let requests: LabelledHandles<RequestOutcome>
    /// The sync endpoint's requests, latency (send to answer) and failures (a 5xx or no
    /// answer in time).
    let http: EndpointMetrics
    /// By power state.
    let interval: [MetricHandle]
    let outboxDepth: MetricHandle
    let utilisation: MetricHandle
    let queueLength: MetricHandle
    let serverWait: MetricHandle
    let roundTrip: MetricHandle
    let commandLatency: LabelledHandles<Pushed>
    let commands: LabelledHandles<CommandOutcome>
    let approvals: MetricHandle
    let resolved: MetricHandle

    init(recorder: inout Recorder) {
        requests = LabelledHandles("sync.requests", label: "outcome", recorder: &recorder)
        http = EndpointMetrics(stack: "sync", endpoint: SyncStack.endpoint, recorder: &recorder)
        interval = PowerState.allCases.map { recorder.register("sync.interval", labels: [("power_state", $0.description)]) }
        outboxDepth = recorder.register("sync.outbox_depth")
        utilisation = recorder.register("sync.server_utilisation")
        queueLength = recorder.register("sync.server_queue")
        serverWait = recorder.register("sync.server_wait")
        roundTrip = recorder.register("sync.approval_round_trip")
        commandLatency = LabelledHandles("sync.command_latency", label: "push", recorder: &recorder)
        commands = LabelledHandles("sync.commands", label: "outcome", recorder: &recorder)
        approvals = recorder.register("sync.approvals_created")
        resolved = recorder.register("sync.approvals_resolved")
    }
}

/// Invariant ids of the sync stack.
struct SyncInvariants {
    let appliedOnce: Int
    let noLostApprovals: Int
    let outboxDrained: Int
    let dedupUnique: Int

    init(ledger: inout InvariantLedger) {
        appliedOnce = ledger.register("sync.commands_applied_once")
        noLostApprovals = ledger.register("sync.no_lost_approvals")
        outboxDrained = ledger.register("sync.outbox_drained")
        dedupUnique = ledger.register("workflow.no_duplicate_dedup_instances")
    }
}
