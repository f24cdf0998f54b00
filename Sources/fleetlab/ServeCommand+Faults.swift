import Foundation
import LabKernel
import Live
import Simulator

/// `fleetlab serve --faults FILE`: the plan read once by the supervisor, which takes
/// servers down on its timetable, and again by each worker, which plays its own server's
/// slowdowns and errors; both count from the origin the supervisor hands its workers.
extension ServeCommand {
    /// The plan and its timetable in `fleetlab serve`'s server names.
    struct ServedFaults {
        var plan: ServeFaultPlan
        var timetable: FaultTimetable
    }

    /// The `--faults` plan, or nil without one; a bad file or a fault on a server this run
    /// does not start is a clear error.
    func loadFaults() throws -> ServedFaults? {
        guard let faultsFile else { return nil }
        let plan: ServeFaultPlan
        do { plan = try ServeFaultPlan.load(path: faultsFile) } catch { throw CLIFailure.badInput("--faults: \(error)") }
        var windows: [FaultTimetable.Window] = []
        for fault in plan.faults {
            let (server, effect): (StackKind, FaultTimetable.Effect)
            switch fault {
            case .serverCrash(_, _, let stack): (server, effect) = (stack, .down)
            case .serverSlowdown(_, _, let stack, let factor): (server, effect) = (stack, .slowdown(factor: factor))
            case .serverErrors(_, _, let stack, let share): (server, effect) = (stack, .errors(share: share.fraction))
            case .massAppKill, .radioOff, .partition, .linkSlowdown, .pushOutage: continue
            }
            guard let served = Self.served.first(where: { $0.stack == server }), chosen.contains(where: { $0.name == served.name }) else {
                throw CLIFailure.badInput("--faults: a \(fault.kind) of the \(server.rawValue) server, which this run does not start")
            }
            let start = fault.at.seconds
            windows.append(.init(server: served.name, start: start, end: start + (fault.duration ?? .zero).seconds, effect: effect))
        }
        return ServedFaults(plan: plan, timetable: FaultTimetable(windows: windows, period: plan.every?.seconds))
    }

    /// What `serve` prints of the plan before it listens.
    static func describe(_ faults: ServedFaults, file: String) -> [String] {
        let plan = faults.plan
        var lines = ["  faults from \(file)" + (plan.every.map { ", starting over every \($0)" } ?? "") + ":"]
        for (fault, window) in zip(plan.faults, faults.timetable.windows) {
            lines.append("      \(window.server) \(text(window.effect)) from +\(fault.at) for \(fault.duration ?? .zero) (\(fault.kind))")
        }
        if !plan.skipped.isEmpty {
            let kinds = Set(plan.skipped.map(\.kind)).sorted().joined(separator: ", ")
            lines.append("      skipped \(plan.skipped.count) (\(kinds)): they act on simulated phones or networks")
        }
        return lines
    }

    /// In a worker: plays the plan's slowdowns and errors of its own server.
    func playFaults(as served: Served) throws {
        guard let faults = try loadFaults(), let faultsOrigin, let stack = served.stack,
              let serviceTime = faults.plan.serviceTimes[stack] else { return }
        FaultInjection.playFaults(faults.timetable, server: served.name, serviceTime: serviceTime,
                                     origin: Date(timeIntervalSince1970: faultsOrigin))
    }

    /// What `/version` says a fault does to a server now, or nil.
    static func faultNow(_ timetable: FaultTimetable?, server: String, down: Bool, origin: Date) -> String? {
        if down { return text(.down) }
        guard let timetable else { return nil }
        let offset = Date().timeIntervalSince(origin)
        let parts = [timetable.slowdown(server, at: offset).map { text(.slowdown(factor: $0)) },
                     timetable.errorShare(server, at: offset).map { text(.errors(share: $0)) }]
        let said = parts.compactMap { $0 }.joined(separator: ", ")
        return said.isEmpty ? nil : said
    }

    /// What a window does to its server, as `serve` and `/version` say it.
    static func text(_ effect: FaultTimetable.Effect) -> String {
        switch effect {
        case .down: return "down"
        case .slowdown(let factor): return "slowed ×\(String(format: "%g", factor))"
        case .errors(let share): return "failing \(String(format: "%g", share * 100))% of requests"
        }
    }
}
