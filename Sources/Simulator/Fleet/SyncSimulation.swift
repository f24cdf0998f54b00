import DeviceWorkflows
import Orch8Wire
import LabKernel
import MobileSyncServer

/// The server side of a sync simulation: the real `SyncServer` core behind a worker-pool
/// service-time model, the virtual network between it and the devices, the operator who
/// resolves approvals, and the push service.
///
/// Theory of operation. A device's request crosses the network to the server; if a
/// worker is free it is served at once, otherwise it waits in a FIFO queue (beyond
/// `queueLimit` it is refused with 503 and Retry-After). Serving takes a time drawn from
/// `serviceTime`; only when it ends does the core handle the request (so its state
/// changes at completion), and the response crosses the network back. A crash drops the
/// queue and everything in service (their devices time out) and refuses arrivals until
/// the restart; the state survives. Approvals the core creates go to the operator, who
/// resolves each after a think time; the resulting command is announced by a silent push
/// when the device has a push token, unless pushes are down or lost.
struct SyncSimulation {
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
    }

    var server: SyncServer
    let settings: SyncSettings
    var network: VirtualNetwork<Message>
    let serverEndpoint: EndpointID
    /// Endpoint of each device, by device index.
    var endpoints: [EndpointID]
    var exchanges: [UInt32: Exchange] = [:]
    var nextToken: UInt32 = 0
    var busyWorkers = 0
    var waiting: [UInt32] = []
    var waitingHead = 0
    var serverDown = false
    /// Bumped by a crash: service completions from before it are void.
    var epoch: UInt32 = 0
    var busyIntegral: Int64 = 0
    var lastBusyChange: Instant = .zero
    var pushOutage = false
    var generator: SeededGenerator
    var operatorGenerator: SeededGenerator
    var pushGenerator: SeededGenerator
    /// When each command was created and whether a push announced it.
    var commandCreated: [String: (at: Instant, pushed: Bool)] = [:]
    /// complete_step commands: the gate they resolve, for the approval round trip.
    var commandGate: [String: String] = [:]
    var appliedCommands: Set<String> = []
    var operatorTasks: [UInt32: (approval: String, value: String)] = [:]
    var nextOperatorTask: UInt32 = 0

    var queueLength: Int { waiting.count - waitingHead }

    mutating func token() -> UInt32 {
        nextToken &+= 1
        return nextToken
    }

    mutating func enqueue(_ token: UInt32) {
        if waitingHead > 1_024 && waitingHead * 2 > waiting.count {
            waiting.removeFirst(waitingHead)
            waitingHead = 0
        }
        waiting.append(token)
    }

    mutating func dequeue() -> UInt32? {
        guard waitingHead < waiting.count else { return nil }
        waitingHead += 1
        return waiting[waitingHead - 1]
    }

    /// Accounts worker time up to `now`, for the utilisation gauge.
    mutating func accountBusy(to now: Instant) {
        busyIntegral += Int64(busyWorkers) * (now - lastBusyChange).nanoseconds
        lastBusyChange = now
    }
}

/// Metric handles of the sync layer.
struct SyncMetrics {
    static let requestOutcomes = ["ok", "refused", "timeout", "unreachable"]
    static let pushOutcomes = ["delivered", "lost", "outage", "duplicate", "not_running"]
    static let commandOutcomes = ["applied", "duplicate", "refused", "deferred"]

    let requests: [MetricHandle]
    let latency: MetricHandle
    let interval: [MetricHandle]
    let outboxDepth: MetricHandle
    let utilisation: MetricHandle
    let queueLength: MetricHandle
    let serverWait: MetricHandle
    let roundTrip: MetricHandle
    let commandLatency: [MetricHandle]
    let pushes: [MetricHandle]
    let commands: [MetricHandle]
    let approvals: MetricHandle
    let resolved: MetricHandle

    init(recorder: inout Recorder) {
        requests = Self.requestOutcomes.map { recorder.register("sync.requests", labels: [("outcome", $0)]) }
        latency = recorder.register("sync.latency")
        interval = PowerState.allCases.map { recorder.register("sync.interval", labels: [("power_state", $0.description)]) }
        outboxDepth = recorder.register("sync.outbox_depth")
        utilisation = recorder.register("sync.server_utilisation")
        queueLength = recorder.register("sync.server_queue")
        serverWait = recorder.register("sync.server_wait")
        roundTrip = recorder.register("sync.approval_round_trip")
        commandLatency = ["yes", "no"].map { recorder.register("sync.command_latency", labels: [("push", $0)]) }
        pushes = Self.pushOutcomes.map { recorder.register("sync.pushes", labels: [("outcome", $0)]) }
        commands = Self.commandOutcomes.map { recorder.register("sync.commands", labels: [("outcome", $0)]) }
        approvals = recorder.register("sync.approvals_created")
        resolved = recorder.register("sync.approvals_resolved")
    }
}

/// Invariant ids of the sync layer.
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
