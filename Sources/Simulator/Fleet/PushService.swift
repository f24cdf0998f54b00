import LabKernel

/// The platform push service (APNs, FCM) in virtual time, shared by every stack's server:
/// one token per app, so a device either can be woken by all of them or by none.
///
/// A push is lost, or delivered once or twice, each after its own delay, all drawn from
/// the receiving device's stream (`push`), so another device's pushes change nothing for
/// it; during a push outage nothing is sent. Whether the app registered a token is the
/// device's own draw (`push-token`). What a delivered push does to the phone is the
/// device model's (`VirtualDevice.wakeForPush`).
struct PushService {
    enum Outcome: Int, MetricLabel {
        /// Handed to the platform (one per copy delivered).
        case sent
        case lost
        /// Dropped: the push service is down.
        case outage
        /// The platform delivered a second copy.
        case duplicate
        /// On arrival, by what the push did (`PushArrival`).
        case woke, running, notRunning
        var label: String { ["sent", "lost", "outage", "duplicate", "woke", "running", "not_running"][rawValue] }

        init(_ wake: PushArrival) {
            switch wake {
            case .woke: self = .woke
            case .running: self = .running
            case .notRunning: self = .notRunning
            }
        }
    }

    let settings: PushSettings
    /// The push service is down (a push-outage fault).
    var outage = false
    private var tokens: [Int: Bool] = [:]
    private var streams: [Int: SeededGenerator] = [:]
    private var metrics: [StackKind: LabelledHandles<Outcome>] = [:]

    init(_ settings: PushSettings) {
        self.settings = settings
    }

    /// Registers `push.notifications{stack, outcome}` for the stacks whose servers push.
    mutating func register(_ stacks: [StackKind], recorder: inout Recorder) {
        for stack in stacks {
            metrics[stack] = LabelledHandles("push.notifications", label: "outcome", extra: [("stack", stack.rawValue)], recorder: &recorder)
        }
    }

    func handles(_ stack: StackKind) -> LabelledHandles<Outcome>? { metrics[stack] }

    /// Whether the device's app registered a push token.
    mutating func hasToken(_ device: Int, fleetSeed seed: StreamSeed) -> Bool {
        if let known = tokens[device] { return known }
        var draw = seed.child("push-token").generator()
        let has = draw.chance(settings.share)
        tokens[device] = has
        return has
    }

    /// Sends a push to `device`: what happened to it, and the delay of each copy that will
    /// arrive (none when lost, down or without a token).
    mutating func send(to device: Int, fleetSeed seed: StreamSeed) -> (outcomes: [Outcome], delays: [TimeSpan]) {
        guard hasToken(device, fleetSeed: seed) else { return ([], []) }
        if outage { return ([.outage], []) }
        var stream = streams[device] ?? seed.child("push").generator()
        defer { streams[device] = stream }
        if stream.chance(settings.loss) { return ([.lost], []) }
        let copies = stream.chance(settings.duplication) ? 2 : 1
        let delays = (0..<copies).map { _ in settings.delay.sampleSpan(using: &stream) }
        return (copies == 2 ? [.sent, .sent, .duplicate] : [.sent], delays)
    }
}

extension Fleet {
    /// A stack's server pushes to a device: each copy the platform delivers arrives as a
    /// `.push` event. False when the device has no push token.
    @discardableResult
    mutating func sendPush(to device: Int, stack: StackKind, at now: Instant, queue: inout EventQueue<FleetWorld.Event>) -> Bool {
        let (outcomes, delays) = push.send(to: device, fleetSeed: deviceSeed(device))
        if let handles = push.handles(stack) { for outcome in outcomes { recorder.add(handles[outcome]) } }
        for delay in delays { queue.schedule(.push(device: UInt32(device), stack: stack), at: now + delay) }
        return push.hasToken(device, fleetSeed: deviceSeed(device))
    }
}
