import ArgumentParser
import Foundation
import AIBridgeDaemon
import LabKernel
import Live

struct AIDaemonCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ai-daemon",
        abstract: "Run a Mobile AI Bridge desktop daemon against a relay until Ctrl-C.",
        discussion: """
        The daemon dials the relay's tunnel (authenticated with its own Ed25519 key, kept in \
        --data with its id), prints a pairing PIN (valid 5 minutes; a new one after each \
        use or expiry) and answers the commands phones send through the relay. Its pairing \
        key pair is new at every start, so a restart makes phones pair again, as the \
        seed's desktop app does. --command runs a local program per prompt (the prompt on \
        stdin, its stdout streamed back); without it, answers are scripted.
        """)

    @Option(help: "The relay's URL, e.g. http://127.0.0.1:7740 (fleetlab serve's ai-bridge).")
    var relay: String

    @Option(help: "Directory for the daemon's identity key and id.")
    var data = ".fleetlab-daemon"

    @Option(help: "The daemon's id on the relay (default: one made on first start and kept in --data).")
    var id: String?

    @Option(parsing: .upToNextOption, help: "A program (and arguments) to answer ai_chat prompts with, e.g. --command claude -p.")
    var command: [String] = []

    @Option(help: "How long a --command program may run for one prompt.")
    var timeout = "60s"

    @OptionGroup var tlsOptions: ClientTLSOptions

    @OptionGroup var proxyOptions: ClientProxyOptions

    func run() async throws {
        guard let span = TimeSpan(timeout), span > .zero, span <= .hours(1) else { throw CLIFailure.badInput("--timeout takes 1s…1h, got '\(timeout)'") }
        let say: @Sendable (String) -> Void = AIBridgeRelayLiveServer.printLine
        let driver: AIBridgeDaemonDriver
        let lastDial = LockedBox<String?>(nil)
        do {
            driver = try AIBridgeDaemonDriver(relay: relay, dataDirectory: data, daemonID: id,
                                              chat: command.isEmpty ? nil : .command(argv: command, timeout: span),
                                              tls: try tlsOptions.make(httpsTargets: relay.hasPrefix("https://")),
                                              proxies: try proxyOptions.make()) { event in
                switch event {
                case .pin(let pin, let expires):
                    let time = ISO8601DateFormatter.string(from: expires, timeZone: .current, formatOptions: [.withTime, .withColonSeparatorInTime])
                    say("pairing PIN: \(pin)  (valid until \(time))")
                case .paired(let device): say("paired a phone (device \(device))")
                case .pairingClosed(let reason): if reason != "expired" { say("the pairing session closed: \(reason)") }
                case .connected(let up):
                    lastDial.withLock { $0 = nil }
                    say(up ? "tunnel to \(relay) is up" : "tunnel to \(relay) is down; dialing again")
                case .dialFailed(let reason):
                    // Once per reason, not at every redial: the daemon dials again until stopped.
                    guard lastDial.withLock({ last in defer { last = reason }; return last != reason }) else { return }
                    say("cannot open the tunnel to \(relay): \(reason); dialing again")
                case .refused(let reason): say("the relay refused this daemon: \(reason)")
                }
            }
        } catch {
            throw CLIFailure.badInput("\(error)")
        }
        say("fleetlab ai-daemon \(driver.daemonID) — dialing \(relay) (Ctrl-C to stop)")
        driver.start()
        await Interrupt.wait()
        driver.stop()
        say("fleetlab ai-daemon: stopped")
    }
}
