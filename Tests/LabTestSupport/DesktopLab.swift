public import DesktopBridgeClient
public import DesktopBridgeServer
public import DesktopBridgeWire
public import Foundation
public import LabKernel

/// A desktop and the phones attached to it, on one of the two drivers, as a conformance
/// body drives them: intents carried out, frames and timers pumped until something holds.
public protocol DesktopLab: AnyObject {
    /// A phone speaking `dialect`, told to connect; its index.
    func addPhone(_ dialect: ACPDialect, seed: UInt64) async throws -> Int
    func client(_ phone: Int) -> DesktopClient
    /// Every effect the phone's core produced so far.
    func effects(_ phone: Int) -> [DesktopClientEffect]
    func act(_ phone: Int, _ input: DesktopClientInput) async throws
    /// Delivers frames and due timers until `done` or `seconds` pass.
    func pump(until done: () -> Bool, seconds: Double) async throws
    /// The link drops under the phone's socket.
    func drop(_ phone: Int) async throws
    /// The desktop's history, session by session.
    var history: [String: [HistoryEntry]] { get }
    func stop() async
}

extension DesktopLab {
    public func pump(until done: () -> Bool) async throws { try await pump(until: done, seconds: 10) }

    /// The desktop's history of a session as the phone renders its timeline.
    public func desktopTranscript(_ session: String) -> [String] { (history[session] ?? []).map { DesktopClient.line($0.update) } }
}

/// One phone's core and what it did, shared by both drivers.
final class DesktopLabPhone {
    var client: DesktopClient
    var effects: [DesktopClientEffect] = []

    init(dialect: ACPDialect, seed: UInt64) {
        client = DesktopClient(config: .init(dialect: dialect), seed: StreamSeed(seed))
    }
}

/// The phones of a lab, whichever the driver.
open class DesktopLabPhones {
    var phones: [DesktopLabPhone] = []

    public func addPhone(_ dialect: ACPDialect, seed: UInt64) async throws -> Int {
        phones.append(DesktopLabPhone(dialect: dialect, seed: seed))
        let index = phones.count - 1
        try await connect(index)
        return index
    }

    func connect(_ phone: Int) async throws { fatalError("a lab connects its phones") }

    public func client(_ phone: Int) -> DesktopClient { phones[phone].client }
    public func effects(_ phone: Int) -> [DesktopClientEffect] { phones[phone].effects }
}

/// The desktop core in process in virtual time: a phone's frames reach the core when it
/// sends them and the core's reach the phone's inbox; `pump` moves the clock to the next
/// deadline (the core's or a phone's). Files live in a dictionary (the driver's part).
public final class InProcessDesktopLab: DesktopLabPhones, DesktopLab {
    public var bridge: DesktopBridge
    var connection: [Int: Int] = [:]
    var inbox: [Int: [String]] = [:]
    public var files: [String: String] = [:]
    public var clock = Instant(nanoseconds: 1_800_000_000_000_000_000)

    public init(configure: (inout DesktopConfig) -> Void = { _ in }) {
        var config = DesktopConfig()
        configure(&config)
        bridge = DesktopBridge(config: config, seed: StreamSeed(3), wallClock: .unixEpoch)
        super.init()
    }

    override func connect(_ phone: Int) async throws { try await act(phone, .connect) }
    public var history: [String: [HistoryEntry]] { bridge.state.history }

    public func act(_ phone: Int, _ input: DesktopClientInput) async throws {
        var queue = [input]
        while !queue.isEmpty {
            let effects = phones[phone].client.handle(queue.removeFirst(), now: clock)
            phones[phone].effects += effects
            for effect in effects {
                switch effect {
                case .openSocket:
                    let id = bridge.connect()
                    connection[phone] = id
                    inbox[phone] = []
                    queue.append(.socketOpened)
                case .send(let text):
                    if let id = connection[phone] { carryOut(bridge.receive(id, text: text, now: clock)) }
                case .closeSocket:
                    if let id = connection.removeValue(forKey: phone) { bridge.disconnect(id) }
                    inbox[phone] = []
                case .connected, .sessionCreated, .timelineChanged, .rebuilt, .turnEnded, .promptAccepted, .answered, .failed, .gaveUp:
                    break
                }
            }
        }
    }

    /// Routes the core's frames to the phones' inboxes and does its file operations.
    func carryOut(_ reply: DesktopReply) {
        for case .send(let id, let text) in reply.outputs {
            guard let phone = connection.first(where: { $0.value == id })?.key else { continue }
            inbox[phone, default: []].append(text)
        }
        for operation in reply.operations {
            switch operation {
            case .readFile(let id, let path, _, _):
                carryOut(bridge.operationFinished(id, files[path].map { .success(.read($0)) } ?? .failure(.notFound("no file \(path)")), now: clock))
            case .writeFile(let id, let path, let content):
                files[path] = content
                carryOut(bridge.operationFinished(id, .success(.written), now: clock))
            case .runTerminal(let id, let argv, _, _, _):
                carryOut(bridge.operationFinished(id, .success(.terminal(output: argv.joined(separator: " ") + "\n", truncated: false, exitStatus: 0)), now: clock))
            case .startProgram(let run, _, _):
                carryOut(bridge.agentExited(run: run, status: -1, now: clock))
            case .programInput, .stopProgram:
                break
            }
        }
    }

    public func pump(until done: () -> Bool, seconds: Double) async throws {
        let deadline = clock + .nanoseconds(Int64(seconds * 1e9))
        while true {
            if let due = bridge.nextDeadline, due <= clock { carryOut(bridge.expire(now: clock)) }
            for phone in phones.indices {
                if let due = phones[phone].client.nextDeadline, due <= clock { try await act(phone, .timerFired) }
                while let text = inbox[phone]?.first, !done() {
                    inbox[phone]?.removeFirst()
                    try await act(phone, .socketText(text))
                }
            }
            guard !done() else { return }
            guard inbox.values.allSatisfy(\.isEmpty) else { continue }
            let next = ([bridge.nextDeadline] + phones.map(\.client.nextDeadline)).compactMap { $0 }.min()
            guard let next, next <= deadline else { return }
            clock = max(clock, next)
        }
    }

    public func drop(_ phone: Int) async throws {
        if let id = connection.removeValue(forKey: phone) { bridge.disconnect(id) }
        inbox[phone] = []
        try await act(phone, .socketClosed)
    }

    public func stop() async {}
}

/// Phones over real WebSockets against a served desktop bridge, on the wall clock.
public final class LoopbackDesktopLab: DesktopLabPhones, DesktopLab {
    let port: Int
    var sockets: [Int: WebSocketProbe] = [:]
    let historyOf: () -> [String: [HistoryEntry]]
    let stopper: () async -> Void

    public init(port: Int, history: @escaping () -> [String: [HistoryEntry]], stop: @escaping () async -> Void) {
        self.port = port
        historyOf = history
        stopper = stop
        super.init()
    }

    public var history: [String: [HistoryEntry]] { historyOf() }

    override func connect(_ phone: Int) async throws { try await act(phone, .connect) }

    public func act(_ phone: Int, _ input: DesktopClientInput) async throws {
        var queue = [input]
        while !queue.isEmpty {
            let effects = phones[phone].client.handle(queue.removeFirst(), now: wallNow())
            phones[phone].effects += effects
            for effect in effects {
                switch effect {
                case .openSocket:
                    let port = port
                    sockets[phone] = try? await offPool { try WebSocketProbe(port: port, target: "/") }
                    queue.append(sockets[phone] == nil ? .socketClosed : .socketOpened)
                case .send(let text): try? sockets[phone]?.send(text)
                case .closeSocket: sockets[phone] = nil
                case .connected, .sessionCreated, .timelineChanged, .rebuilt, .turnEnded, .promptAccepted, .answered, .failed, .gaveUp:
                    break
                }
            }
        }
    }

    public func pump(until done: () -> Bool, seconds: Double) async throws {
        let deadline = Date().addingTimeInterval(seconds)
        while !done() && Date() < deadline {
            var quiet = true
            for phone in phones.indices {
                if let due = phones[phone].client.nextDeadline, due <= wallNow() { try await act(phone, .timerFired) }
                guard let probe = sockets[phone] else { continue }
                let frame: WebSocketProbe.Frame?
                do {
                    frame = try await offPool { try probe.receive(timeout: 0.01) }
                } catch {
                    sockets[phone] = nil
                    try await act(phone, .socketClosed)
                    continue
                }
                switch frame {
                case .text(let text)?:
                    quiet = false
                    try await act(phone, .socketText(text))
                case .close?:
                    sockets[phone] = nil
                    try await act(phone, .socketClosed)
                case nil:
                    break
                }
                if done() { return }
            }
            if quiet { try await Task.sleep(for: .milliseconds(5)) }
        }
    }

    public func drop(_ phone: Int) async throws {
        sockets[phone] = nil
        try await act(phone, .socketClosed)
    }

    public func stop() async {
        sockets = [:]
        await stopper()
    }
}
