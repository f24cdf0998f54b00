import Foundation
import LabKernel
import Live
import Simulator
import Synchronization

/// `fleetlab serve --faults FILE`: the plan read once by the supervisor, which takes
/// servers down on its timetable, and again by each worker, which plays its own server's
/// slowdowns and errors; both count from the origin the supervisor hands its workers, or
/// from when the file was saved if that is later. Each process re-reads the file when it
/// changes (`watchFaults`), so a developer starts a fault now by saving a plan whose fault
/// is `at: 0s`, and ends them all with `faults: []`: every process reads the same file and
/// the same save time, so they agree without talking.
extension ServeCommand {
    /// The plan and its timetable in `fleetlab serve`'s server names, and when its clock
    /// started.
    struct ServedFaults: Sendable {
        var plan: ServeFaultPlan
        var timetable: FaultTimetable
        var origin: Date
    }

    /// The `--faults` plan, or nil without one; a bad file or a fault on a server this run
    /// does not start is a clear error. `started`: when `serve` started.
    func loadFaults(started: Date) throws -> ServedFaults? {
        guard let faultsFile else { return nil }
        return try Self.loadFaults(file: faultsFile, chosen: chosen, started: started)
    }

    static func loadFaults(file faultsFile: String, chosen: [Served], started: Date) throws -> ServedFaults {
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
        let saved = savedAt(faultsFile) ?? started
        return ServedFaults(plan: plan, timetable: FaultTimetable(windows: windows, period: plan.every?.seconds), origin: max(started, saved))
    }

    /// When the file was last saved.
    static func savedAt(_ file: String) -> Date? {
        (try? FileManager.default.attributesOfItem(atPath: file))?[.modificationDate] as? Date
    }

    /// Re-reads the plan whenever its file is saved again (looked at every half second, on
    /// a thread of its own): `apply` gets the new plan, its clock starting at the save; a
    /// file that no longer reads keeps the plan before it, and `log` says why.
    static func watchFaults(file: String, chosen: [Served], started: Date, log: @escaping @Sendable (String) -> Void,
                            apply: @escaping @Sendable (ServedFaults) -> Void) {
        let watcher = Thread {
            var seen = savedAt(file)
            while true {
                Thread.sleep(forTimeInterval: 0.5)
                let now = savedAt(file)
                guard now != seen else { continue }
                seen = now
                do { apply(try loadFaults(file: file, chosen: chosen, started: started)) } catch {
                    log("fleetlab serve: \(file) changed but cannot be played, so the plan before it goes on: \(error)")
                }
            }
        }
        watcher.name = "fleetlab-faults-watch"
        watcher.start()
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

    /// In a worker: plays the plan's slowdowns and errors of its own server, and the plan
    /// the file holds each time it is saved again.
    func playFaults(as served: Served) {
        guard let faultsFile, let faultsOrigin, let stack = served.stack else { return }
        let started = Date(timeIntervalSince1970: faultsOrigin)
        let play = { @Sendable (faults: ServedFaults) in
            guard let serviceTime = faults.plan.serviceTimes[stack] else { return }
            FaultInjection.playFaults(faults.timetable, server: served.name, serviceTime: serviceTime, origin: faults.origin)
        }
        // A worker (re)started while the file does not read plays nothing until it does;
        // it must not fail to start over it.
        if let faults = try? loadFaults(started: started) { play(faults) }
        // The supervisor logs a file that cannot be read; one line of it is enough.
        Self.watchFaults(file: faultsFile, chosen: chosen, started: started, log: { _ in }, apply: play)
    }

    /// What `/version` says a fault does to a server now, or nil.
    static func faultNow(_ faults: ServedFaults?, server: String, down: Bool) -> String? {
        if down { return text(.down) }
        guard let timetable = faults?.timetable, let origin = faults?.origin else { return nil }
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
