import Foundation
public import LabKernel
import Yams

/// A scenario file that cannot be used, with where and why.
public struct ScenarioError: Error, CustomStringConvertible, Sendable {
    public var file: String
    public var line: Int?
    public var column: Int?
    /// The key path, like `devices[0].power.drainPerHour`.
    public var path: String
    public var message: String

    public var description: String {
        var location = file
        if let line { location += ":\(line)" + (column.map { ":\($0)" } ?? "") }
        return path.isEmpty ? "\(location): \(message)" : "\(location): \(path): \(message)"
    }
}

/// Reads scenario files and applies command-line overrides.
public enum ScenarioLoader {
    /// The directory of the scenario being decoded: workflow sequences resolve beside it.
    @TaskLocal static var currentDirectory = "."

    public static func load(path: String) throws(ScenarioError) -> Scenario {
        let text = try readText(path: path)
        let directory = (path as NSString).deletingLastPathComponent
        return try parse(text: text, file: path, directory: directory.isEmpty ? "." : directory)
    }

    /// A YAML file's text, or why it cannot be read.
    static func readText(path: String) throws(ScenarioError) -> String {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw ScenarioError(file: path, path: "", message: "no such file")
        }
        guard !isDirectory.boolValue else { throw ScenarioError(file: path, path: "", message: "is a directory, not a scenario file") }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ScenarioError(file: path, path: "", message: "cannot read the file (permissions?)")
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw ScenarioError(file: path, path: "", message: "the file is not UTF-8 text")
        }
        return text
    }

    /// Parses scenario text; workflow sequences named in it resolve under `directory`
    /// (`<directory>/workflows/<name>.json`), as they would beside a scenario file there.
    public static func parse(text: String, file: String, directory: String) throws(ScenarioError) -> Scenario {
        var result: Result<Scenario, ScenarioError> = .failure(ScenarioError(file: file, path: "", message: "not read"))
        $currentDirectory.withValue(directory) {
            do throws(ScenarioError) { result = .success(try parse(text: text, file: file)) } catch { result = .failure(error) }
        }
        return try result.get()
    }

    public static func parse(text: String, file: String) throws(ScenarioError) -> Scenario {
        var scenario = try decode(Scenario.self, text: text, file: file)
        scenario.text = text
        return scenario
    }

    /// Decodes a YAML document of fleetlab's (a scenario, a fault plan) strictly, with a
    /// problem's line, column and key path.
    static func decode<T: Decodable>(_ type: T.Type, text: String, file: String) throws(ScenarioError) -> T {
        let root: Node
        do {
            guard let node = try Yams.compose(yaml: text) else {
                throw ScenarioError(file: file, path: "", message: "the file is empty")
            }
            root = node
        } catch let error as ScenarioError {
            throw error
        } catch let error as YamlError {
            throw yamlProblem(error, file: file)
        } catch {
            throw ScenarioError(file: file, path: "", message: "not valid YAML: \(error)")
        }
        do {
            return try StrictYAMLDecoder.decode(T.self, from: root)
        } catch let problem as StrictYAMLDecoder.Problem {
            let mark = problem.mark ?? node(at: problem.path, in: root)?.mark
            throw ScenarioError(file: file, line: mark?.line, column: mark?.column,
                                path: renderPath(problem.path), message: problem.message)
        } catch let error as DecodingError {
            let problem = NodeDecoder(node: root, codingPath: []).translate(error)
            let mark = node(at: problem.path, in: root)?.mark
            throw ScenarioError(file: file, line: mark?.line, column: mark?.column, path: renderPath(problem.path), message: problem.message)
        } catch {
            throw ScenarioError(file: file, path: "", message: "\(error)")
        }
    }

    /// The node a coding path points at, for its line and column.
    static func node(at path: [any CodingKey], in root: Node) -> Node? {
        var current = root
        for key in path {
            switch current {
            case .mapping(let mapping):
                guard let next = mapping.first(where: { $0.key.string == key.stringValue })?.value else { return current }
                current = next
            case .sequence(let sequence):
                guard let index = key.intValue, index < sequence.count else { return current }
                current = sequence[sequence.index(sequence.startIndex, offsetBy: index)]
            case .scalar, .alias:
                return current
            }
        }
        return current
    }

    static func yamlProblem(_ error: YamlError, file: String) -> ScenarioError {
        switch error {
        case .scanner(let context, let problem, let mark, _), .parser(let context, let problem, let mark, _):
            let prefix = context.map { "\($0.text) " } ?? ""
            return ScenarioError(file: file, line: mark.line, column: mark.column, path: "", message: "not valid YAML: \(prefix)\(problem)")
        case .composer(let context, let problem, let mark, _):
            let prefix = context.map { "\($0.text) " } ?? ""
            return ScenarioError(file: file, line: mark.line, column: mark.column, path: "", message: "not valid YAML: \(prefix)\(problem)")
        default:
            return ScenarioError(file: file, path: "", message: "not valid YAML: \(error)")
        }
    }
}

extension Scenario {
    /// Applies `--devices`, `--duration` and `--seed`. A new device total is shared out
    /// over the populations in proportion to their sizes (largest remainder), and the chat
    /// groups in proportion too, so a scenario scales without editing the file.
    public func overriding(devices total: Int? = nil, duration: TimeSpan? = nil, seed: UInt64? = nil) -> Scenario {
        var copy = self
        var notes: [String] = []
        if let seed { copy.seed = seed; notes.append("seed=\(seed)") }
        if let duration { notes.append("duration=\(duration)") }
        if let total { notes.append("devices=\(total)") }
        if !notes.isEmpty {
            copy.text += (copy.text.hasSuffix("\n") || copy.text.isEmpty ? "" : "\n") + "# fleetlab overrides: " + notes.joined(separator: " ") + "\n"
        }
        if let duration {
            copy.duration = duration
            copy.bucket = Scenario.defaultBucket(for: duration)
            copy.faults = faults.filter { $0.at < duration }
        }
        if let total {
            let current = deviceCount
            let weights = current == 0 ? devices.map { _ in 1 } : devices.map(\.count)
            let weightSum = weights.reduce(0, +)
            var counts = weights.map { $0 * total / weightSum }
            let remainders = weights.enumerated().map { (index: $0.offset, rest: $0.element * total % weightSum) }
            var missing = total - counts.reduce(0, +)
            for entry in remainders.sorted(by: { ($0.rest, -$0.index) > ($1.rest, -$1.index) }) where missing > 0 {
                counts[entry.index] += 1
                missing -= 1
            }
            for index in copy.devices.indices { copy.devices[index].count = counts[index] }
            // Groups are people who know each other: their number grows with the fleet.
            if let groups = chat?.groups, current > 0 {
                copy.chat!.groups = min(100_000, Int((Double(groups) * Double(total) / Double(current)).rounded()))
            }
        }
        return copy
    }
}
