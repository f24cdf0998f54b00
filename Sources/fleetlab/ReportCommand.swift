import ArgumentParser
import Foundation
import LabStore
import Reports

struct ReportCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "report",
        abstract: "Re-render the dashboard of a results database.")

    @Argument(help: "A results.sqlite written by `fleetlab simulate`.")
    var results: String

    @Option(help: "Where to write the HTML (default: dashboard.html beside the database).")
    var out: String?

    @Option(help: "A dashboard layout (JSON), e.g. dashboards/simulation.json.")
    var layout: String?

    func run() throws {
        let loaded: RunResults
        do {
            loaded = try ResultsDatabase.open(at: results).load()
        } catch {
            throw CLIFailure.badInput("\(error)")
        }
        var chosen = DashboardLayout.simulation
        if let layout {
            do { chosen = try DashboardLayout.load(path: layout) } catch { throw CLIFailure.badInput("\(error)") }
        }
        let target = out ?? ((results as NSString).deletingLastPathComponent as NSString).appendingPathComponent("dashboard.html")
        try OutputPaths.checkWritableFile(target)
        try OutputPaths.write(Dashboard.render(loaded, layout: chosen), to: target)
        print("dashboard: \(target)")
    }
}

struct DigestCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "digest",
        abstract: "Print the determinism digest of a results database.",
        discussion: "SHA-256 over every table except `run`; equal scenario, seed and build give equal digests.")

    @Argument(help: "A results.sqlite.")
    var results: String

    @Flag(help: "The fleet digest instead: scenario, populations, histograms and whole counters by metric name, which a merge of shards shares with the single run.")
    var fleet = false

    func run() throws {
        do {
            let database = try ResultsDatabase.open(at: results)
            print(try fleet ? ResultsDigest.fleet(database) : ResultsDigest.compute(database))
        } catch {
            throw CLIFailure.badInput("\(error)")
        }
    }
}
