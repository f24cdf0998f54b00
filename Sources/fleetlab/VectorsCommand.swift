import ArgumentParser
import ChatCrypto
import Foundation
import LabKernel

/// `fleetlab vectors e2e-crypto`: the chat encryption profile's published test vectors.
struct VectorsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "vectors",
        abstract: "Write or check published test vectors.",
        subcommands: [E2ECryptoVectors.self])
}

struct E2ECryptoVectors: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "e2e-crypto",
        abstract: "Regenerate docs/vectors/e2e-crypto-v1.json, or check a vectors file.",
        discussion: """
        The vectors come from fixed seeds, so every build writes the same bytes. --check FILE \
        replays every case of FILE from its seeds and reports each mismatch (exit 3), which is \
        how an independent implementation's vectors can be compared with this one.
        """)

    @Option(help: "Where to write the vectors (- for standard output).")
    var out = "docs/vectors/e2e-crypto-v1.json"

    @Option(help: "Check this vectors file instead of writing one.")
    var check: String?

    func run() throws {
        if let check {
            guard let data = FileManager.default.contents(atPath: check) else { throw CLIFailure.badInput("cannot read \(check)") }
            let file: JSONValue
            do { file = try JSONValue.parse(bytes: Array(data)) } catch { throw CLIFailure.badInput("\(check): not JSON: \(error)") }
            let problems = CryptoVectors.verify(file)
            guard problems.isEmpty else {
                throw CLIFailure(message: "\(check): \(problems.count) mismatches\n" + problems.map { "  " + $0 }.joined(separator: "\n"),
                                 status: ExitStatus.checksFailed)
            }
            print("\(check): every case replays from its seeds (profile \(CryptoVectors.profile))")
            return
        }
        let text: String
        do { text = try CryptoVectors.fileText() } catch { throw CLIFailure(message: "cannot generate the vectors: \(error)", status: 1) }
        if out == "-" {
            print(text, terminator: "")
            return
        }
        let directory = (out as NSString).deletingLastPathComponent
        do {
            if !directory.isEmpty { try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true) }
            try text.write(toFile: out, atomically: true, encoding: .utf8)
        } catch {
            throw CLIFailure.badInput("cannot write \(out): \(error.localizedDescription)")
        }
        print("wrote \(out)")
    }
}
