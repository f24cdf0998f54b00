public import AIBridgeClient
public import AIBridgeDaemon
public import AIBridgeRelay
public import AIBridgeWire
public import LabKernel

/// The AI bridge's three cores in virtual time, for tests: a relay, daemons that dial it,
/// phones that pair and send. Tunnel frames and HTTP exchanges are handed over at once;
/// `advance` moves the clock through every timer (the relay's deadlines, the daemons'
/// streams and PIN expiries, the phones' deadlines) in time order. Deterministic.
public struct BridgeWorld {
    public var relay: BridgeRelay
    public var now: Instant = .zero + .seconds(1_000)
    public var daemons: [String: Daemon] = [:]
    public var phones: [String: Phone] = [:]
    /// Relay exchange → the phone and its request id.
    var exchanges: [Int: (phone: String, id: Int)] = [:]
    /// Tunnel id → daemon id.
    var tunnelDaemon: [Int: String] = [:]
    /// Every change the relay asked to commit.
    public var committed: [RelayStoreChange] = []

    public struct Daemon {
        public var core: BridgeDaemon
        public var tunnel: Int?
        public var effects: [DaemonEffect] = []
        public var pin: String? {
            effects.reversed().lazy.compactMap { effect -> String? in if case .pairingOffered(let pin, _) = effect { return pin }; return nil }.first
        }
    }

    public struct Phone {
        public var client: BridgeClient
        public var peer: String
        public var effects: [BridgeClientEffect] = []
        /// Chunks received per request id, and how each request ended.
        public var text: [Int: String] = [:]
        public var finished: [Int: JSONValue] = [:]
        public var failed: [Int: BridgeError] = [:]
        public var lastStarted: Int? {
            effects.reversed().lazy.compactMap { effect -> Int? in if case .started(let id, _) = effect { return id }; return nil }.first
        }
    }

    public init(configure: (inout RelayConfig) -> Void = { _ in }) {
        var config = RelayConfig()
        configure(&config)
        relay = BridgeRelay(config: config, seed: StreamSeed(21))
    }

    /// A daemon with a stable identity (`identity` picks it) and this run's stream (`run`).
    public mutating func startDaemon(_ id: String, identity: UInt8 = 1, run: UInt64 = 1, chat: BridgeDaemon.ChatProvider? = nil,
                                     keepPairingOpen: Bool = true) {
        var config = BridgeDaemon.Config(daemonID: id)
        if let chat { config.chat = chat }
        config.keepPairingOpen = keepPairingOpen
        let core = try! BridgeDaemon(config: config, identitySeed: [UInt8](repeating: identity, count: 32), seed: StreamSeed(run))
        daemons[id] = Daemon(core: core)
        feed(daemon: id, .openPairing)
        feed(daemon: id, .start)
    }

    /// The daemon's process dies: its tunnel closes, nothing it held survives.
    public mutating func killDaemon(_ id: String) {
        guard let tunnel = daemons[id]?.tunnel else { daemons[id] = nil; return }
        daemons[id] = nil
        tunnelDaemon[tunnel] = nil
        absorb(relay.tunnelClosed(tunnel, now: now))
    }

    public mutating func addPhone(_ name: String, peer: String = "10.0.0.1", seal: Bool = true, seed: UInt64 = 3) {
        var config = BridgeClient.Config(relayURL: "http://relay")
        config.seal = seal
        phones[name] = Phone(client: BridgeClient(snapshot: .init(deviceID: "device-\(name)", seed: StreamSeed(seed)), config: config), peer: peer)
    }

    public mutating func feed(daemon id: String, _ input: DaemonInput) {
        guard var daemon = daemons[id] else { return }
        let effects = daemon.core.handle(input, now: now)
        daemon.effects += effects
        daemons[id] = daemon
        for effect in effects {
            switch effect {
            case .connect:
                let (tunnel, reply) = relay.tunnelOpened(now: now)
                daemons[id]!.tunnel = tunnel
                tunnelDaemon[tunnel] = id
                feed(daemon: id, .tunnelOpened)
                absorb(reply)
            case .send(let text):
                guard let tunnel = daemons[id]?.tunnel else { continue }
                absorb(relay.tunnelReceived(tunnel, text: text, now: now))
            case .disconnect:
                guard let tunnel = daemons[id]?.tunnel else { continue }
                daemons[id]!.tunnel = nil
                tunnelDaemon[tunnel] = nil
                absorb(relay.tunnelClosed(tunnel, now: now))
            case .startCommand(let run, _, let input, _):
                // A stand-in program: the prompt upper-cased, then a clean exit.
                feed(daemon: id, .backendOutput(run: run, text: input.uppercased()))
                feed(daemon: id, .backendFinished(run: run, status: 0, reason: nil))
            case .stopCommand, .pairingOffered, .pairingClosed, .paired, .refused:
                break
            }
        }
    }

    public mutating func feed(phone name: String, _ input: BridgeClientInput) {
        guard var phone = phones[name] else { return }
        let effects = phone.client.handle(input, now: now)
        phone.effects += effects
        phones[name] = phone
        for effect in effects {
            switch effect {
            case .request(let id, var request):
                request.peer = phone.peer
                let reply = relay.handle(request, now: now)
                committed += reply.changes
                if let exchange = reply.pending { exchanges[exchange] = (name, id) } else { feed(phone: name, .response(id: id, reply.response)) }
                absorb(reply, answersIncluded: false)
            case .cancelRequest(let id):
                if let exchange = exchanges.first(where: { $0.value.phone == name && $0.value.id == id })?.key {
                    exchanges[exchange] = nil
                    absorb(relay.exchangeAbandoned(exchange))
                }
            case .chunk(let id, let text): phones[name]!.text[id, default: ""] += text
            case .finished(let id, let value): phones[name]!.finished[id] = value
            case .failed(let id, let error): phones[name]!.failed[id] = error
            case .started, .keychainChanged, .paired:
                break
            }
        }
    }

    /// Carries out what the relay asked: answers to phones, frames to daemons.
    mutating func absorb(_ reply: RelayReply, answersIncluded: Bool = true) {
        if answersIncluded { committed += reply.changes }
        for output in reply.outputs {
            switch output {
            case .respond(let exchange, let response):
                guard let (phone, id) = exchanges.removeValue(forKey: exchange) else { continue }
                feed(phone: phone, .response(id: id, response))
            case .streamOpen(let exchange):
                guard let (phone, id) = exchanges[exchange] else { continue }
                feed(phone: phone, .streamHead(id: id, status: 200, headers: [HTTPHeader("Content-Type", "text/event-stream")]))
            case .streamEvent(let exchange, let event):
                guard let (phone, id) = exchanges[exchange] else { continue }
                feed(phone: phone, .streamBody(id: id, ServerSentEvents.encode(event)))
            case .streamClose(let exchange):
                guard let (phone, id) = exchanges.removeValue(forKey: exchange) else { continue }
                feed(phone: phone, .streamEnd(id: id))
            case .tunnelSend(let tunnel, let text):
                guard let daemon = tunnelDaemon[tunnel] else { continue }
                feed(daemon: daemon, .tunnelText(text))
            case .tunnelClose(let tunnel, _, let reason):
                guard let daemon = tunnelDaemon.removeValue(forKey: tunnel) else { continue }
                daemons[daemon]?.tunnel = nil
                daemons[daemon]?.effects.append(.refused(reason: reason))
                feed(daemon: daemon, .tunnelClosed)
            }
        }
    }

    /// Moves the clock to `now + span`, firing every timer due on the way in time order.
    public mutating func advance(by span: TimeSpan) {
        let end = now + span
        while true {
            var next: (at: Instant, who: Int, name: String)?
            func consider(_ at: Instant?, _ who: Int, _ name: String) {
                guard let at, at <= end, next == nil || (at, who, name) < (next!.at, next!.who, next!.name) else { return }
                next = (at, who, name)
            }
            consider(relay.nextDeadline, 0, "")
            for (id, daemon) in daemons { consider(daemon.core.nextDeadline, 1, id) }
            for (name, phone) in phones { consider(phone.client.nextDeadline, 2, name) }
            guard let due = next else { break }
            now = max(now, due.at)
            switch due.who {
            case 0: absorb(relay.expire(now: now))
            case 1: feed(daemon: due.name, .timerFired)
            default: feed(phone: due.name, .timerFired)
            }
        }
        now = max(now, end)
    }

    /// Pairs `phone` with `daemon`'s current PIN.
    public mutating func pair(_ phone: String, with daemon: String) {
        guard let pin = daemons[daemon]?.pin else { return }
        feed(phone: phone, .pair(pin: pin))
    }

    /// A relay with daemon "mac" connected and phone "ada" paired with it.
    public static func paired() -> BridgeWorld {
        var world = BridgeWorld()
        world.startDaemon("mac")
        world.addPhone("ada")
        world.pair("ada", with: "mac")
        return world
    }
}
