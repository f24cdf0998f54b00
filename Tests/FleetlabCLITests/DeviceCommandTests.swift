import Foundation
import LabTestSupport
import Testing

@Suite("fleetlab device", .serialized)
struct DeviceCommandTests {
    @Test("a live device registers, runs a workflow with an answer, syncs it and its telemetry to the server, and says so")
    func runsAgainstServe() async throws {
        let served = try await ServedFleetlab.start(data: TestPaths.scratchDirectory("device-serve").path)
        defer { served.stop() }
        let state = TestPaths.scratchDirectory("device-state").path
        let run = try await CommandRunner.fleetlabAsync(["device", "--sync", served.syncURL, "--key", served.rootKey, "--device-id", "cli-phone",
                                              "--sequences", "simulations/workflows", "--start", "payment-verification",
                                              "--answer", "payment_approval=approved", "--duration", "3s", "--data", state])
        #expect(run.status == 0, "\(run.stderr)")
        for line in ["registered cli-phone", "loaded payment-verification v1", "started payment-verification", "push channel open", "sync: sent"] {
            #expect(run.stdout.contains(line), "missing '\(line)' in:\n\(run.stdout)")
        }
        let status = try await HTTPProbe.request("GET", served.syncURL + "/api/v1/mobile/status?device_id=cli-phone",
                                                 headers: ["x-api-key": served.rootKey])
        #expect(status.text.contains(#""state":"Completed""#), "\(status.text)")
        let events = try await HTTPProbe.request("GET", served.syncURL + "/api/v1/mobile/devices/cli-phone/telemetry",
                                                 headers: ["x-api-key": served.rootKey])
        #expect((events.json as? [String: Any])?["total"] as? Int ?? 0 > 0, "the engine's telemetry reached the server")

        // A second run continues from the state the first left.
        let again = try await CommandRunner.fleetlabAsync(["device", "--sync", served.syncURL, "--key", served.rootKey, "--device-id", "cli-phone",
                                                "--sequences", "simulations/workflows", "--duration", "1s", "--data", state, "--no-push"])
        #expect(again.status == 0 && !again.stdout.contains("push channel open"))
    }

    @Test("bad input is exit status 2 with a message", arguments: [
        (["--sync", "not a url", "--key", "k"], "--sync takes the server's base URL"),
        (["--sync", "http://127.0.0.1:9", "--key", "k", "--duration", "soon"], "--duration takes a duration"),
        (["--sync", "http://127.0.0.1:9", "--key", "k", "--answer", "noequals"], "--answer takes STEP=VALUE"),
        (["--sync", "http://127.0.0.1:9", "--key", "k", "--duration", "1s"], "could not register with the server at http://127.0.0.1:9: cannot connect to 127.0.0.1:9: Connection refused"),
    ])
    func badInput(arguments: [String], message: String) async throws {
        let run = try await CommandRunner.fleetlabAsync(["device", "--data", TestPaths.scratchDirectory("device-bad").path] + arguments)
        #expect(run.status == 2 && run.stderr.contains(message), "\(run.status): \(run.stderr)")
    }

    @Test("GET /version reports the ports the servers really listen on when --port moves them")
    func versionReportsMovedPorts() async throws {
        let port = try ServedFleetlab.freePort()
        let served = try await ServedFleetlab.start(syncPort: port, data: TestPaths.scratchDirectory("version-serve").path)
        defer { served.stop() }
        let version = try await HTTPProbe.get(served.hostURL + "/version")
        let servers = (version.json as? [String: Any])?["servers"] as? [[String: Any]] ?? []
        #expect(servers.first { $0["name"] as? String == "mobile-sync" }?["port"] as? Int == port)
        let chatPort = Int(served.chatURL.split(separator: ":").last ?? "")
        #expect(servers.first { $0["name"] as? String == "chat" }?["port"] as? Int == chatPort && chatPort != 7720)
    }
}
