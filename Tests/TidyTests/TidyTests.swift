import Foundation
import Testing
import LabTestSupport

/// Source rules that keep simulation runs a pure function of scenario, seed and build
/// (TigerBeetle's tidy.zig). Cores take `now` and a seeded generator as inputs; only the
/// drivers (Live, LoadTest, the CLI and the simulator's wall-clock file) touch real time.
@Suite("Tidy")
struct TidyTests {
    /// Module folders that are drivers and may use clocks, tasks and NIO.
    static let drivers: Set<String> = ["Live", "LoadTest", "fleetlab", "CSQLite", "CSodium"]
    /// Single files inside core modules allowed to read the wall clock, and why.
    static let allowed: [String: String] = [
        "Simulator/Driver/WallClock.swift": "the one place the simulator reads real time (progress, run metadata)",
    ]

    struct Rule: Sendable {
        var pattern: String
        var replacement: String
        var isViolation: @Sendable (String) -> Bool
    }

    static let rules: [Rule] = [
        Rule(pattern: "Date()", replacement: "take `now: Instant` as an input") { $0.contains("Date()") },
        Rule(pattern: "ContinuousClock", replacement: "take `now: Instant` as an input") { $0.contains("ContinuousClock") },
        Rule(pattern: "SuspendingClock", replacement: "take `now: Instant` as an input") { $0.contains("SuspendingClock") },
        Rule(pattern: "DispatchTime", replacement: "take `now: Instant` as an input") { $0.contains("DispatchTime") },
        Rule(pattern: "UUID()", replacement: "derive ids from the seeded generator") { $0.contains("UUID()") },
        Rule(pattern: "SystemRandomNumberGenerator", replacement: "use a SeededGenerator passed in") { $0.contains("SystemRandomNumberGenerator") },
        Rule(pattern: ".random( without using:", replacement: "use generator.next(below:) or .random(in:using:)") {
            $0.contains(".random(") && !$0.contains("using:")
        },
        Rule(pattern: "Task {", replacement: "return an effect; drivers own concurrency") { $0.contains("Task {") || $0.contains("Task.detached") },
        Rule(pattern: "DispatchQueue", replacement: "return an effect; drivers own concurrency") { $0.contains("DispatchQueue") },
        Rule(pattern: "import NIO / Hummingbird", replacement: "keep I/O in Live") {
            $0.hasPrefix("import NIO") || $0.contains(" import NIO") || $0.contains("import Hummingbird")
        },
        Rule(pattern: "FIXME", replacement: "fix it or open an issue") { $0.contains("FIXME") },
    ]

    static func swiftFiles(under folder: String) -> [(relative: String, url: URL)] {
        let root = TestPaths.packageRoot.appendingPathComponent(folder)
        guard let walker = FileManager.default.enumerator(at: root, includingPropertiesForKeys: nil) else { return [] }
        var files: [(String, URL)] = []
        for case let url as URL in walker where url.pathExtension == "swift" {
            files.append((String(url.path.dropFirst(root.path.count + 1)), url))
        }
        return files.sorted { $0.0 < $1.0 }
    }

    @Test("cores never read a clock, draw unseeded randomness, spawn tasks or import NIO")
    func determinismRules() throws {
        var violations: [String] = []
        var scanned = 0
        for (relative, url) in Self.swiftFiles(under: "Sources") {
            let module = String(relative.prefix { $0 != "/" })
            guard !Self.drivers.contains(module), Self.allowed[relative] == nil else { continue }
            scanned += 1
            let lines = try String(contentsOf: url, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false)
            for (number, line) in lines.enumerated() {
                let code = String(line.split(separator: "//", maxSplits: 1, omittingEmptySubsequences: false).first ?? "")
                for rule in Self.rules where rule.isViolation(code) {
                    violations.append("Sources/\(relative):\(number + 1): \(rule.pattern): \(rule.replacement)")
                }
            }
        }
        #expect(scanned > 40, "the tidy scan found only \(scanned) files; did the layout change?")
        #expect(violations.isEmpty, Comment(rawValue: "\n" + violations.joined(separator: "\n")))
    }

    @Test("LabKernel stays free of Foundation")
    func kernelIsFoundationFree() throws {
        for (relative, url) in Self.swiftFiles(under: "Sources/LabKernel") {
            let text = try String(contentsOf: url, encoding: .utf8)
            #expect(!text.contains("import Foundation"), "Sources/LabKernel/\(relative) imports Foundation")
        }
    }

    @Test("no source or test file grows past 600 lines")
    func fileLength() throws {
        for folder in ["Sources", "Tests"] {
            for (relative, url) in Self.swiftFiles(under: folder) {
                let count = try String(contentsOf: url, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false).count
                #expect(count <= 600, "\(folder)/\(relative) has \(count) lines; split it by concern")
            }
        }
    }

    @Test("the rules catch what they are meant to catch")
    func rulesBite() {
        let samples = ["let t = Date()", "let c = ContinuousClock()", "Int.random(in: 0..<3)", "Task { await x() }", "import NIOCore"]
        for sample in samples {
            #expect(Self.rules.contains { $0.isViolation(sample) }, "\(sample) slipped through")
        }
        #expect(!Self.rules.contains { $0.isViolation("generator.next(below: 3); Int.random(in: 0..<3, using: &g)") })
    }
}
