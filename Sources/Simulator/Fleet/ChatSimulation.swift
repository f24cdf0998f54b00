import LabKernel
import SecureChatClient
import SecureChatServer

/// The chat world of a fleet run (docs/chat.md): the d3chat server core, a client core
/// with real crypto on every chatting device, and the plan of who talks where.
///
/// Requests, responses and socket frames cross each device's link with its latency (an
/// offline device's requests fail at once and its socket is closed). The server answers
/// at once: the model is about the clients, their crypto and their reconnects.
struct ChatSimulation {
    enum Transit {
        case request(device: Int, id: Int, HTTPRequestMessage)
        case connect(device: Int, ticket: String)
        case frame(device: Int, String)
        case input(device: Int, ClientInput)
    }

    /// A message a user sent, and the devices still to read it.
    struct Sent {
        var at: Instant
        var group: Bool
        var acked = false
        var pending: Set<Int>
    }

    var server: ChatServer
    var clients: [Int: ChatClient] = [:]
    var userOfDevice: [Int: Int] = [:]
    var devicesOfUser: [[Int]] = []
    var connectionOf: [Int: Int] = [:]
    var deviceOfConnection: [Int: Int] = [:]
    var transits: [UInt32: Transit] = [:]
    var nextTransit: UInt32 = 0
    var timerGeneration: [Int: UInt32] = [:]
    /// Each client's wake-up in the queue (its `nextDeadline` when last scheduled).
    var timerAt: [Int: Instant] = [:]
    /// When the last frame on each device's socket arrives (frames keep their order).
    var socketArrival: [Int: Instant] = [:]
    var generator: SeededGenerator
    /// Groups as user indices (the first creates it), their channels, each user's groups.
    var groups: [[Int]] = []
    var groupChannel: [Int: String] = [:]
    var groupsOfUser: [Int: [Int]] = [:]
    var dmPartners: [Int: [Int]] = [:]
    var sent: [String: Sent] = [:]
    var sequence: [Int: Int] = [:]
    /// Server user id → user index.
    var userIndex: [String: Int] = [:]
    /// Client counters already recorded, per device and stat.
    var recordedStats: [Int: ChatClient.Stats] = [:]
    var metrics: ChatMetrics
    var invariants: ChatInvariants

    mutating func park(_ transit: Transit) -> UInt32 {
        let slot = nextTransit
        nextTransit &+= 1
        transits[slot] = transit
        return slot
    }
}

struct ChatMetrics {
    let messages: [MetricHandle]
    let ackLatency: [MetricHandle]
    let deliveryLatency: [MetricHandle]
    let decrypted: MetricHandle
    let failures: MetricHandle
    let reconnects: MetricHandle
    let replenished: MetricHandle
    let refreshes: MetricHandle
    let connected: MetricHandle
    let typing: MetricHandle

    static let kinds = ["dm", "group"]

    init(recorder: inout Recorder) {
        messages = Self.kinds.map { recorder.register("chat.messages", labels: [("kind", $0)]) }
        ackLatency = Self.kinds.map { recorder.register("chat.ack_latency", labels: [("kind", $0)]) }
        deliveryLatency = Self.kinds.map { recorder.register("chat.delivery_latency", labels: [("kind", $0)]) }
        decrypted = recorder.register("chat.decrypted")
        failures = recorder.register("chat.decryption_failures")
        reconnects = recorder.register("chat.reconnects")
        replenished = recorder.register("chat.otk_replenished")
        refreshes = recorder.register("chat.refreshes")
        connected = recorder.register("chat.connected")
        typing = recorder.register("chat.typing")
    }
}

struct ChatInvariants {
    let everyMemberReads: Int
    let noDecryptionFailure: Int
    let perSenderOrder: Int
    let noDuplicates: Int
    let noPlaintextOnServer: Int

    init(ledger: inout InvariantLedger) {
        everyMemberReads = ledger.register("chat.every_member_device_decrypts")
        noDecryptionFailure = ledger.register("chat.no_decryption_failures")
        perSenderOrder = ledger.register("chat.per_sender_order")
        noDuplicates = ledger.register("chat.no_duplicates")
        noPlaintextOnServer = ledger.register("chat.no_plaintext_on_server")
    }
}
