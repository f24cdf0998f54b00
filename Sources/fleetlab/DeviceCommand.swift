import ArgumentParser
import DeviceWorkflows
import WorkflowHost
import Orch8Wire
import Foundation
import LabKernel
import Live

/// `fleetlab device`: one real device (engine, reporter, outbox, push channel) on the wall
/// clock against any orch8 sync server, saying what it does, so the Mobile Sync page can
/// be tried without writing an app.
struct DeviceCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "device",
        abstract: "Run one live device against a sync server, printing what it does, until Ctrl-C.",
        discussion: """
        The device registers, loads its sequences (from --sequences DIR, else the server's \
        /{tenant}/sequences.json), subscribes to the server's development push channel, and \
        then ticks its engine, syncs on the server's cadence (or at once when woken) and \
        sends its telemetry. Its state lives in --data, so a second run continues where the \
        first stopped, as a relaunched app does.

        Example, beside `fleetlab serve` (which publishes no sequences of its own), from the \
        repository's root:
          fleetlab device --sync http://127.0.0.1:7710 --key fl_root_… \\
            --sequences simulations/workflows --start payment-verification
        """)

    @Option(help: "The sync server's base URL.")
    var sync: String

    @Option(help: "An API key: the server's root key or a tenant's.")
    var key: String

    @Option(name: .customLong("device-id"), help: "The device's id.")
    var deviceID = "fleetlab-device"

    @Option(help: "A directory of sequence files (*.json, orch8 format) to load.")
    var sequences: String?

    @Option(help: "The tenant whose sequences.json to load when --sequences is not given (_ for the root key's).")
    var tenant = "_"

    @Option(help: "Directory for the device's SQLite state.")
    var data = ".fleetlab-device"

    @Option(help: "Start an instance of this sequence once running; repeatable.")
    var start: [String] = []

    @Option(help: "Answer a waiting step on the device itself, as STEP=VALUE; repeatable.")
    var answer: [String] = []

    @Option(help: "Stop after this long (e.g. 90s, 10m); default: until Ctrl-C.")
    var duration: String?

    @OptionGroup var tlsOptions: ClientTLSOptions

    @OptionGroup var proxyOptions: ClientProxyOptions

    @Flag(name: .customLong("no-push"), help: "Do not subscribe to the push channel (sync on the cadence only).")
    var noPush = false

    @Option(help: "Seed of the engine's random stream.")
    var seed: UInt64 = 1

    func run() async throws {
        let limit = try duration.map { text -> TimeSpan in
            guard let span = TimeSpan(text), span > .zero else { throw CLIFailure.badInput("--duration takes a duration such as 90s or 10m, got '\(text)'") }
            return span
        }
        var answers: [String: JSONValue] = [:]
        for entry in answer {
            let parts = entry.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2, !parts[0].isEmpty else { throw CLIFailure.badInput("--answer takes STEP=VALUE, got '\(entry)'") }
            answers[parts[0]] = .string(parts[1])
        }
        let base = sync.hasSuffix("/") ? String(sync.dropLast()) : sync
        guard let url = URL(string: base), url.scheme == "http" || url.scheme == "https", url.host != nil else {
            throw CLIFailure.badInput("--sync takes the server's base URL, such as http://127.0.0.1:7710, got '\(sync)'")
        }
        let http = HTTPClient(tls: try tlsOptions.make(httpsTargets: url.scheme == "https"), proxies: try proxyOptions.make())
        try FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: true)
        var config = MobileEngineConfig()
        config.tickIntervalMs = 250
        let device: LiveDevice<SQLiteWorkflowStore>
        do {
            device = try LiveDevice.open(baseURL: base, apiKey: key, deviceID: deviceID,
                                         storePath: (data as NSString).appendingPathComponent("device.sqlite"), config: config, seed: seed, http: http)
        } catch {
            throw CLIFailure.badInput("cannot open the device's state under \(data): \(error)")
        }
        device.host.standingAnswers = answers
        device.host.setDeviceContext(DeviceContext(deviceID: deviceID, osName: "linux", osVersion: ProcessInfo.processInfo.operatingSystemVersionString,
                                                   appVersion: "fleetlab-\(FleetlabVersion.string)"))
        let say = DeviceLog()
        do {
            try await device.register(platform: "android", pushToken: "fleetlab-dev")
        } catch let refused as any HTTPStatusFailure {
            throw CLIFailure.badInput("the server at \(base) refused the registration: \(refused)")
        } catch {
            // Not reached, or no answer in time: nothing was refused.
            throw CLIFailure.badInput("could not register with the server at \(base): \(error)")
        }
        say("registered \(deviceID) at \(base)")
        try await loadSequences(device, say)
        for name in start {
            do {
                say("started \(name): instance \(try device.host.start(name))")
            } catch {
                throw CLIFailure.badInput("cannot start \(name): \(error)")
            }
        }
        Interrupt.install()
        let push = PushSubscription(enabled: !noPush)
        let began = Date()
        var seenWaits = 0
        while !Interrupt.isRequested {
            if let limit, Date().timeIntervalSince(began) * 1e9 >= Double(limit.nanoseconds) { break }
            await push.keepConnected(device, say)
            for wake in device.takeWakes() { say("push: woken for command \(wake["command_id"]?.stringValue ?? "?")") }
            do {
                try device.step()
                for (instance, step) in device.host.unanswered.dropFirst(seenWaits) {
                    say("waiting: \(step) of \(instance) (answer it on the dashboard, or run with --answer \(step)=VALUE)")
                }
                seenWaits = device.host.unanswered.count
                let failures = device.host.syncClient?.failures ?? 0
                if let report = try await device.syncIfDue() {
                    describe(report, device, say)
                } else if let failed = device.host.syncClient?.failures, failed > failures {
                    say("sync failed (\(failed) in a row); retrying after a backoff")
                }
            } catch {
                say("error: \(error)")
            }
            try? await Task.sleep(for: .milliseconds(Int(config.tickIntervalMs)))
        }
        push.stopping = true
        device.unsubscribeFromPush()
        let flushed = (try? await device.flushTelemetry()) ?? 0
        say("stopped; \(device.telemetrySent) telemetry events sent in all (\(flushed) at the end); state kept in \(data)")
    }

    func loadSequences(_ device: LiveDevice<SQLiteWorkflowStore>, _ say: DeviceLog) async throws {
        if let sequences {
            let files = ((try? FileManager.default.contentsOfDirectory(atPath: sequences)) ?? []).filter { $0.hasSuffix(".json") }.sorted()
            guard !files.isEmpty else { throw CLIFailure.badInput("--sequences \(sequences): no .json files there") }
            for file in files {
                let path = (sequences as NSString).appendingPathComponent(file)
                guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { throw CLIFailure.badInput("\(path): not readable UTF-8") }
                do {
                    let info = try device.host.loadSequence(json: text)
                    say("loaded \(info.name) v\(info.version) from \(file)")
                } catch {
                    throw CLIFailure.badInput("\(path) is not a valid sequence: \(error)")
                }
            }
            return
        }
        let listURL = device.baseURL + "/\(tenant)/sequences.json"
        do {
            let loaded = try await device.loadSequences(fromURL: listURL)
            say("loaded \(loaded.loaded.count) sequences from \(listURL)" + (loaded.loaded.isEmpty ? " (publish some, or pass --sequences DIR)" : ": "
                + loaded.loaded.map { "\($0.name) v\($0.version)" }.joined(separator: ", ")))
            for problem in loaded.problems { say("  not loaded: \(problem)") }
        } catch {
            say("no sequences loaded from \(listURL): \(error)")
        }
    }

    func describe(_ report: CommandReport, _ device: LiveDevice<SQLiteWorkflowStore>, _ say: DeviceLog) {
        let sent = device.lastSent
        var line = "sync: sent \(sent.statuses) statuses, \(sent.approvals) approvals, \(sent.delegations) delegations, \(sent.acks) acks"
        let received = report.applied.count + report.duplicates.count + report.refused.count + report.deferred.count
        if received > 0 { line += "; \(received) commands: \(report.applied.count) applied" }
        if !report.refused.isEmpty { line += ", refused: " + report.refused.map { "\($0.id) (\($0.reason))" }.joined(separator: "; ") }
        if !report.deferred.isEmpty { line += ", deferred: " + report.deferred.map { "\($0.id) (\($0.reason))" }.joined(separator: "; ") }
        if sent.statuses + sent.approvals + sent.delegations + sent.acks + received > 0 { say(line) }
        for started in report.started { say("started instance \(started.instanceID) (command \(started.command))") }
    }
}

/// Lines the device prints, each with the wall-clock time.
struct DeviceLog {
    func callAsFunction(_ text: String) {
        let time = ISO8601DateFormatter.string(from: Date(), timeZone: .current, formatOptions: [.withTime, .withColonSeparatorInTime])
        FileHandle.standardOutput.write(Data("\(time)  \(text)\n".utf8))
    }
}

/// Keeps the push channel open: (re)connects with a growing pause after a failure.
final class PushSubscription: @unchecked Sendable {
    // Unchecked: used from the device loop only; `ended` is set from the channel's thread
    // and read there, a flag whose late read only delays a reconnect by one loop.
    let enabled: Bool
    var connected = false
    var ended = false
    /// Set before the device closes the channel itself, which is then not news.
    var stopping = false
    var nextTry = Date.distantPast
    var failures = 0

    init(enabled: Bool) { self.enabled = enabled }

    func keepConnected(_ device: LiveDevice<SQLiteWorkflowStore>, _ say: DeviceLog) async {
        if ended {
            connected = false
            ended = false
        }
        guard enabled, !connected, Date() >= nextTry else { return }
        do {
            try await device.subscribeToPush(onEnd: { [weak self] why in
                guard let self, !self.stopping else { return }
                self.ended = true
                say("push channel closed: \(why)")
            })
            connected = true
            failures = 0
            say("push channel open")
        } catch {
            failures += 1
            let pause = min(60.0, pow(2.0, Double(failures)))
            nextTry = Date().addingTimeInterval(pause)
            say("push channel unavailable (\(error)); retrying in \(Int(pause)) s")
        }
    }
}
