public import AgentRuntimeWire
import Foundation
public import LabKernel
import Yams

/// The agent runtime's workflow files (`simulations/agent-workflows/`): YAML or JSON, one
/// workflow per file, read into `AgentWorkflow`s that `fleetlab serve` and the simulator
/// hand to the server core. Every problem names the file and the key.
public enum AgentWorkflowFiles {
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// Where the files live unless told otherwise: `simulations/agent-workflows` under the
    /// working directory.
    public static let defaultDirectory = "simulations/agent-workflows"

    /// Every `*.yaml`, `*.yml` and `*.json` file of a folder, by file name.
    public static func load(directory: String) throws -> [AgentWorkflow] {
        let names: [String]
        do { names = try FileManager.default.contentsOfDirectory(atPath: directory) } catch {
            throw Failure(description: "cannot read the agent workflows folder \(directory): \(error.localizedDescription)")
        }
        var workflows: [AgentWorkflow] = []
        for name in names.sorted() where [".yaml", ".yml", ".json"].contains(where: { name.hasSuffix($0) }) {
            let path = (directory as NSString).appendingPathComponent(name)
            let workflow = try load(file: path)
            if let clash = workflows.first(where: { $0.name == workflow.name }) {
                throw Failure(description: "\(path): the workflow name '\(clash.name)' is used by another file")
            }
            workflows.append(workflow)
        }
        return workflows
    }

    public static func load(file path: String) throws -> AgentWorkflow {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { throw Failure(description: "cannot read \(path)") }
        let value: JSONValue
        do {
            if path.hasSuffix(".json") {
                value = try JSONValue.parse(text)
            } else {
                guard let node = try Yams.compose(yaml: text) else { throw Failure(description: "\(path): the file is empty") }
                value = try json(node)
            }
        } catch let failure as Failure {
            throw failure
        } catch {
            throw Failure(description: "\(path): not valid \(path.hasSuffix(".json") ? "JSON" : "YAML"): \(error)")
        }
        do { return try AgentWorkflow(parsing: value) } catch { throw Failure(description: "\(path): \(error.description)") }
    }

    /// A YAML tree as JSON: plain scalars by YAML's core schema, quoted ones as strings.
    static func json(_ node: Node) throws -> JSONValue {
        switch node {
        case .scalar(let scalar):
            guard scalar.style == .plain else { return .string(scalar.string) }
            if node.null != nil { return .null }
            if let bool = node.bool { return .bool(bool) }
            if let int = node.int { return .number(Double(int)) }
            if let float = node.float, float.isFinite { return .number(float) }
            return .string(scalar.string)
        case .mapping(let mapping):
            var object: [String: JSONValue] = [:]
            for (key, value) in mapping {
                guard case .scalar(let name) = key else { throw Failure(description: "keys must be plain names (line \(key.mark?.line ?? 0))") }
                object[name.string] = try json(value)
            }
            return .object(object)
        case .sequence(let sequence):
            return .array(try sequence.map(json))
        case .alias:
            throw Failure(description: "YAML aliases are not supported here")
        }
    }
}
