import ArgumentParser
import Benchmarks
import ChatCrypto
import Foundation
import LabKernel
import LabStore
import Simulator

/// `fleetlab bench crypto`: the chat encryption profile beside the bare libsodium calls.
struct CryptoBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "crypto",
        abstract: "Chat encryption: X3DH, the ratchet and sender keys beside the bare libsodium calls they make.",
        discussion: """
        Each operation runs through ChatCrypto and through a loop of exactly the libsodium \
        calls it makes on preallocated buffers, alternating, ROUNDS times; the best round of \
        each is kept. The target: our layers add at most 30 % over the bare calls. X3DH runs \
        OPERATIONS / 10 handshakes (each: 9 X25519, a verify, 2 key conversions, 2 HKDFs). \
        Build with `swift build -c release`.
        """)

    @Option(help: "Messages per measurement.")
    var operations = 100_000

    @Option(help: "Plaintext bytes per message (at most 1200).")
    var bytes = 100

    @Option(help: "Rounds; the best of each side is kept.")
    var rounds = 5

    @OptionGroup var output: BenchJSON

    func validate() throws {
        guard (10...10_000_000).contains(operations) else { throw ValidationError("--operations must be 10...10000000") }
        guard (0...1_200).contains(bytes) else { throw ValidationError("--bytes must be 0...1200") }
        guard (1...50).contains(rounds) else { throw ValidationError("--rounds must be 1...50") }
    }

    func run() throws {
        try output.check()
        let figures: [CryptoBenchmark.Figure]
        do {
            figures = try CryptoBenchmark.run(operations: operations, messageBytes: bytes, rounds: rounds, clock: WallClock.seconds)
        } catch { throw CLIFailure(message: "the benchmark failed: \(error)", status: 1) }
        let n = { (v: Double) in MetricUnit.decimal(v, digits: 0) }
        print("fleetlab bench crypto — \(bytes)-byte messages, best of \(rounds) rounds (\(BuildInfo.description))")
        print("  operation                       ours/s     bare/s    overhead")
        for f in figures {
            let over = MetricUnit.decimal(f.overhead * 100, digits: 1) + " %"
            print("  \(f.name.padding(toLength: 28, withPad: " ", startingAt: 0)) \(n(f.oursPerSecond).leftPad(9))  \(n(f.barePerSecond).leftPad(9))"
                + "  \(over.leftPad(9))\(f.overhead <= 0.30 ? "" : "  (over the 30 % target)")")
        }
        try output.write(bench: "crypto", parameters: ["operations": .figure(Double(operations)), "bytes": .figure(Double(bytes)), "rounds": .figure(Double(rounds))],
                         figures: .array(figures.map { f in
                             ["operation": .string(f.name), "ours_per_second": .figure(f.oursPerSecond), "bare_per_second": .figure(f.barePerSecond),
                              "overhead": .figure(f.overhead), "target_overhead": .figure(0.30)]
                         }))
        #if DEBUG
        print("  note: this is a debug build; use `swift build -c release` for real figures")
        #endif
    }
}

extension String {
    func leftPad(_ width: Int) -> String { count >= width ? self : String(repeating: " ", count: width - count) + self }
}
