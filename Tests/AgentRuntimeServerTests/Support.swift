import AgentRuntimeServer
import AgentRuntimeWire
import Foundation
import LabKernel
import LabTestSupport
import Simulator

/// The repository's workflow files, and a world that serves them.
enum Fixtures {
    static let workflows: [AgentWorkflow] = {
        let directory = TestPaths.packageRoot.appendingPathComponent("simulations/agent-workflows").path
        return (try? AgentWorkflowFiles.load(directory: directory)) ?? []
    }()

    static func world(authRequired: Bool = true, configure: (inout AgentServerConfig) -> Void = { _ in }) -> AgentWorld {
        AgentWorld(workflows: workflows, authRequired: authRequired, configure: configure)
    }

    /// Starts a chat for `user` of `app` over HTTP; its id.
    static func start(_ world: inout AgentWorld, app: String = "acme", user: String = "ada", workflow: String = "trip-planner",
                      requestID: String? = nil) -> String {
        var body: [String: JSONValue] = ["user_id": .string(user)]
        if let requestID { body["client_request_id"] = .string(requestID) }
        let response = world.http("POST", "/api/chats/\(app)/\(workflow)/start", token: world.token(app: app, user: user), json: .object(body))
        return response.jsonBody?["chat_id"]?.stringValue ?? ""
    }

    static func socket(_ world: inout AgentWorld, chat: String, app: String = "acme", user: String = "ada", workflow: String = "trip-planner",
                       resumesItself: Bool = true) -> Int? {
        let token = world.token(app: app, user: user)
        return world.connect("/ws/\(workflow)/\(app)/\(chat)/\(user)?access_token=\(token)" + (resumesItself ? "&resume=client" : "")).connection
    }
}

extension Array where Element == String {
    /// The frames as envelopes.
    var envelopes: [RuntimeEnvelope] { compactMap { RuntimeEnvelope(text: $0) } }
}
