import Foundation

/// Faults an operator (or a test) turns on from the environment, FoundationDB-style: off
/// unless asked for, read once at start, never reachable by a client on its own.
///
/// `FLEETLAB_FAULT_TRAP_PATH=/some/path` makes a request to exactly that path trap inside
/// its handler, the way a bug would: it is how the supervisor's restart of a crashed
/// server is tested for real (a signal sent from outside is not the same: Swift's crash
/// reporter returns from an external SIGILL).
enum FaultInjection {
    static let trapPath: String? = ProcessInfo.processInfo.environment["FLEETLAB_FAULT_TRAP_PATH"].flatMap { $0.isEmpty ? nil : $0 }

    static func check(path: String) {
        if let trapPath, path == trapPath { preconditionFailure("FLEETLAB_FAULT_TRAP_PATH: a request to \(path) traps, as asked") }
    }
}
