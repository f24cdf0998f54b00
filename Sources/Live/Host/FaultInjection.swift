public import Foundation
public import LabKernel
import HTTPTypes
import HummingbirdWebSocket
import NIOWebSocket
import Synchronization

/// Faults an operator (or a test) turns on, FoundationDB-style: off unless asked for, set
/// once when a worker starts, never reachable by a client on its own.
///
/// `FLEETLAB_FAULT_TRAP_PATH=/some/path` makes a request to exactly that path trap inside
/// its handler, the way a bug would: it is how the supervisor's restart of a crashed
/// server is tested for real (a signal sent from outside is not the same: Swift's crash
/// reporter returns from an external SIGILL).
///
/// A brownout (`fleetlab serve --faults` with a `server-slowdown`) holds each request the
/// worker's server takes while a slowdown is in force for `factor − 1` service times
/// drawn from its capacity model, before the server handles it: the time the same fault
/// adds in the simulator, where a request holds a worker `factor` times its service time
/// and the core sees it at the end. There is no worker pool to queue behind here, so a live
/// brownout adds latency without the simulator's queue. While a `server-errors` window is
/// in force, each request is, by a draw, answered 503 with `Retry-After` before its server
/// sees it, as the simulated server answers when it sheds a request. A WebSocket upgrade is
/// drawn the same way, and one an errors window fails opens only to be closed with 1013
/// (try again later), as the simulated server turns a socket away. A text frame a client
/// sends on an open socket is held in a slowdown as a request is (the simulator's frames
/// wait for a worker too), but upgrades are not: the decision stays synchronous, on the
/// connection's event loop, as Hummingbird runs a synchronous upgrade check (an
/// asynchronous one waits for Swift's cooperative pool, which a busy process may not
/// give it in time).
public enum FaultInjection {
    static let trapPath: String? = ProcessInfo.processInfo.environment["FLEETLAB_FAULT_TRAP_PATH"].flatMap { $0.isEmpty ? nil : $0 }

    static func check(path: String) {
        if let trapPath, path == trapPath { preconditionFailure("FLEETLAB_FAULT_TRAP_PATH: a request to \(path) traps, as asked") }
    }

    /// What a worker's `--faults` windows need: when they hold, and what one service time is.
    struct Played {
        var timetable: FaultTimetable
        var server: String
        var serviceTime: Distribution
        var origin: Date
        var generator: SeededGenerator
    }

    static let played = Mutex<Played?>(nil)

    /// Makes this process's server (`server`, as `fleetlab serve` names it) play the
    /// timetable's slowdowns and errors, counted from `origin`. Once, before it serves.
    public static func playFaults(_ timetable: FaultTimetable, server: String, serviceTime: Distribution, origin: Date) {
        played.withLock { $0 = Played(timetable: timetable, server: server, serviceTime: serviceTime, origin: origin, generator: SeededGenerator(seed: 0x5105)) }
    }

    /// How long a request arriving now waits before its server takes it; zero outside a
    /// slowdown.
    static func slowdownDelay(now: Date) -> TimeInterval {
        played.withLock { state -> TimeInterval in
            guard var b = state, let factor = b.timetable.slowdown(b.server, at: now.timeIntervalSince(b.origin)) else { return 0 }
            let service = b.serviceTime.sample(using: &b.generator)
            state = b
            return (factor - 1) * service
        }
    }

    /// Whether a request arriving now is failed by a `server-errors` window (by a draw).
    static func failsRequest(now: Date) -> Bool {
        played.withLock { state -> Bool in
            guard var b = state, let share = b.timetable.errorShare(b.server, at: now.timeIntervalSince(b.origin)) else { return false }
            let fails = b.generator.nextUnit() < share
            state = b
            return fails
        }
    }

    /// The answer to a request a `server-errors` window fails.
    static let injectedError = HTTPResponseMessage.json(503, ["error": "unavailable: the server is failing requests (fleetlab serve --faults)"],
                                                        headers: [HTTPHeader("Retry-After", "5")])

    /// Plays the worker's windows on a request before its server sees it: holds it as a
    /// slowdown in force says, then answers for the server when an errors window fails it
    /// (nil: the server handles it).
    static func play() async -> HTTPResponseMessage? {
        try? await hold()
        return failsRequest(now: Date()) ? injectedError : nil
    }

    /// Holds a request or a frame as a slowdown in force says, before its server takes it
    /// (throws only when the waiting task is cancelled: a socket's reader at shutdown).
    static func hold() async throws {
        let delay = slowdownDelay(now: Date())
        if delay > 0 { try await Task.sleep(for: .seconds(delay)) }
    }

    typealias Upgrade = ShouldUpgradeResult<WebSocketDataHandler<HTTP1WebSocketUpgradeChannel.Context>>

    /// Plays an errors window on a socket's upgrade before its server sees it (a chat ticket
    /// is not spent): nil, the server takes the socket; else the upgrade to answer instead,
    /// a socket closed at once with 1013.
    static func shedsUpgrade() -> Upgrade? {
        guard failsRequest(now: Date()) else { return nil }
        return .upgrade([:]) { _, outbound, _ in try? await outbound.close(.unknown(1013), reason: "the server is failing requests (fleetlab serve --faults)") }
    }
}
