import Foundation
import LabKernel
import LabTestSupport
import Testing

/// `fleetlab serve`'s desktop bridge against a client that is not fleetlab's: the official
/// ACP Python SDK (its models generated from the protocol's published schema), on its own
/// WebSocket transport. `scripts/install-deps` puts it in `.venv-acp`.
@Suite("fleetlab serve: the desktop bridge against the ACP SDK")
struct ServeDesktopBridgeTests {
    static let python = TestPaths.packageRoot.appendingPathComponent(".venv-acp/bin/python").path
    static let script = TestPaths.packageRoot.appendingPathComponent("Tests/Fixtures/acp_sdk_client.py").path

    @Test("initialize → session/new → a prompt with streamed updates → a cancelled prompt, every message valid to the SDK")
    func sdkClient() async throws {
        guard FileManager.default.isExecutableFile(atPath: Self.python) else {
            Issue.record("the ACP SDK is not installed: run scripts/install-deps (it creates .venv-acp)")
            return
        }
        let served = try await ServedFleetlab.start(data: TestPaths.scratchDirectory("serve-desktop").path)
        defer { served.stop() }
        #expect(served.desktopURL.hasPrefix("ws://127.0.0.1:"), "serve prints the desktop bridge as a ws:// endpoint")
        let url = served.desktopURL
        let run = try await offPool { try CommandRunner.wait(for: CommandRunner.start([Self.script, url], executable: URL(fileURLWithPath: Self.python))) }
        #expect(run.status == 0, "\(run.stderr.suffix(2_000))")
        let report = try JSONValue.parse(run.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
        #expect(report["protocolVersion"] == 1 && report["agent"] == "fleetlab-desktop")
        #expect(report["workspace"]?.stringValue?.hasSuffix("/workspace") == true)
        #expect(report["firstStop"] == "end_turn" && report["secondStop"] == "cancelled")
        let kinds = report["kinds"]?.arrayValue?.compactMap(\.stringValue) ?? []
        #expect(Array(kinds.prefix(6)) == ["CurrentModeUpdate", "UserMessageChunk", "AgentThoughtChunk", "AgentPlanUpdate", "ToolCallStart", "ToolCallProgress"])
        #expect(kinds.dropFirst(6).allSatisfy { $0 == "AgentMessageChunk" } && kinds.count > 8)
        #expect(report["answer"]?.stringValue?.hasPrefix("I looked at your 6-word request") == true)
        #expect(report["modes"] == ["default_mode", "claude-code", "codex"])
    }
}
