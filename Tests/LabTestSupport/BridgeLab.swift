public import AIBridgeClient
public import Foundation
public import LabKernel

/// The AI bridge on one of the two drivers, as a conformance body drives it: a relay with
/// one daemon that can be killed and restarted, and phones.
public protocol BridgeLab: AnyObject {
    /// The PIN the daemon offers now (waiting for one if need be).
    func pin() async throws -> String
    func phone(_ seed: UInt64) async throws -> any BridgePhoneDevice
    /// The daemon's process dies.
    func killDaemon() async
    /// It starts again: the same identity, a new pairing key pair.
    func restartDaemon() async throws
    func stop() async
}

/// A phone's client core on a lab's driver.
public protocol BridgePhoneDevice: AnyObject {
    var client: BridgeClient { get async }
    /// What the core told the app so far.
    var effects: [BridgeClientEffect] { get async }
    func feed(_ input: BridgeClientInput) async
    /// Lets time pass (virtual or real) until `done` holds over the effects, or `seconds`.
    func pump(until done: @escaping @Sendable ([BridgeClientEffect]) -> Bool, seconds: Double) async
}

extension BridgePhoneDevice {
    /// The text streamed for request `id`, and how it ended.
    public func outcome(of id: Int) async -> (text: String, finished: Bool, error: BridgeError?) {
        var text = ""
        var finished = false
        var error: BridgeError?
        for effect in await effects {
            switch effect {
            case .chunk(id, let piece): text += piece
            case .finished(id, _): finished = true
            case .failed(id, let failure): error = failure
            default: break
            }
        }
        return (text, finished, error)
    }

    /// The id of the last request started.
    public func lastStarted() async -> Int? {
        await effects.reversed().lazy.compactMap { effect -> Int? in if case .started(let id, _) = effect { return id }; return nil }.first
    }

    /// Sends and waits for the request's end.
    public func call(_ command: String, _ payload: [String: JSONValue], seconds: Double = 15) async -> (text: String, finished: Bool, error: BridgeError?) {
        await feed(.send(command: command, payload: payload))
        guard let id = await lastStarted() else { return ("", false, nil) }
        await pump(until: { effects in
            effects.contains { effect in
                switch effect {
                case .finished(id, _), .failed(id, _): return true
                default: return false
                }
            }
        }, seconds: seconds)
        return await outcome(of: id)
    }
}

/// The three cores in process, in virtual time (`BridgeWorld`): a lab on the simulated driver.
public final class InProcessBridgeLab: BridgeLab, @unchecked Sendable {
    // Unchecked: used from one test task at a time.
    var world = BridgeWorld()
    var run: UInt64 = 1
    var phones = 0

    public init() { world.startDaemon("desk") }

    public func pin() async throws -> String {
        guard let pin = world.daemons["desk"]?.pin else { throw CancellationError() }
        return pin
    }

    public func phone(_ seed: UInt64) async throws -> any BridgePhoneDevice {
        phones += 1
        let name = "phone\(phones)"
        world.addPhone(name, peer: "10.0.0.\(phones)", seed: seed)
        return Device(lab: self, name: name)
    }

    public func killDaemon() async { world.killDaemon("desk") }

    public func restartDaemon() async throws {
        run += 1
        world.startDaemon("desk", identity: 1, run: run)
    }

    public func stop() async {}

    final class Device: BridgePhoneDevice, @unchecked Sendable {
        let lab: InProcessBridgeLab
        let name: String
        init(lab: InProcessBridgeLab, name: String) {
            self.lab = lab
            self.name = name
        }
        var client: BridgeClient { lab.world.phones[name]!.client }
        var effects: [BridgeClientEffect] { lab.world.phones[name]!.effects }
        func feed(_ input: BridgeClientInput) async { lab.world.feed(phone: name, input) }
        func pump(until done: @escaping @Sendable ([BridgeClientEffect]) -> Bool, seconds: Double) async {
            var waited = 0.0
            while !done(lab.world.phones[name]!.effects) && waited < seconds {
                lab.world.advance(by: .milliseconds(100))
                waited += 0.1
            }
        }
    }
}
