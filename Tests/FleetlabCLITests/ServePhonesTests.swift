import Foundation
import Testing
import LabKernel
import LabStore
import LabTestSupport

/// What `fleetlab serve` needs to serve apps on real phones: TLS on every port
/// (`--tls-cert --tls-key`) and the address the phones reach it at (`--advertise`).
@Suite("fleetlab serve for real phones", .serialized)
struct ServePhonesTests {
    @Test("with a certificate every server speaks https:// and wss:// only: phones that trust its CA sync, chat over their sockets and pair through the AI bridge relay")
    func servesTLS() async throws {
        let dir = TestPaths.scratchDirectory("serve-tls")
        let certificates = try TestCertificates(in: dir)
        let served = try await ServedFleetlab.start(data: dir.appendingPathComponent("data").path,
                                                    extra: ["--tls-cert", certificates.serverCertificate, "--tls-key", certificates.serverKey,
                                                            "--chat-auth-per-minute", "100000", "--without", "ai-daemon"])
        defer { served.stop() }
        for url in [served.syncURL, served.chatURL, served.hostURL, served.agentURL, served.aiBridgeURL] {
            #expect(url.hasPrefix("https://127.0.0.1:"), "\(url)")
        }
        #expect(served.desktopURL.hasPrefix("wss://127.0.0.1:"), "\(served.desktopURL)")
        // Plain HTTP to a TLS port gets no answer.
        await #expect(throws: (any Error).self) { _ = try await HTTPProbe.get(served.hostURL.replacingOccurrences(of: "https://", with: "http://") + "/health") }

        let scenario = try writeScenario(loadScenario(extra: "chat: {groups: 0}"), in: dir, name: "load.yaml")
        let common = ["--duration", "2s", "--devices", "4", "--think", "200ms", "--quiet", "--ca-file", certificates.ca]
        let run = try await CommandRunner.fleetlabAsync(["loadtest", scenario, "--target", "sync=\(served.syncURL)", "--target", "chat=\(served.chatURL)",
                                                         "--out", "stacks"] + common, in: dir, environment: ["FLEETLAB_KEY_SYNC": served.rootKey])
        #expect(run.status == 0, "\(run.stdout)\(run.stderr)")
        let results = try ResultsDatabase.open(at: dir.appendingPathComponent("stacks/results.sqlite").path).load()
        #expect(results.total(allLabelsOf: "http.failures") == 0)
        #expect((results.total("loadtest.iterations", labels: "outcome=ok") ?? 0) >= 8)
        // The chat messages went over the sockets (wss://) and were decrypted on the partners' phones.
        #expect(results.histogram(try #require(results.metric(named: "chat.delivery_latency", labels: "kind=dm"))).totalCount >= 4)

        // Desktops (in the generator) reach the relay over wss:// and phones pair with them over https://.
        let bridge = try writeScenario(bridgeLoadScenario, in: dir, name: "bridge.yaml")
        let paired = try await CommandRunner.fleetlabAsync(["loadtest", bridge, "--target", "ai-bridge=\(served.aiBridgeURL)", "--out", "bridge"] + common,
                                                           in: dir)
        #expect(paired.status == 0, "\(paired.stdout)\(paired.stderr)")
        let prompts = try ResultsDatabase.open(at: dir.appendingPathComponent("bridge/results.sqlite").path).load()
        #expect(prompts.total("bridge.pairings", labels: "outcome=ok") == 4, "each phone paired with its own desktop")
        #expect(prompts.total("http.failures", labels: "endpoint=POST /v1/chat,stack=ai-bridge") == 0)

        // One real device, as `fleetlab device` runs it: sync and its push channel over TLS.
        let workflows = TestPaths.packageRoot.appendingPathComponent("simulations/workflows").path
        let device = try await CommandRunner.fleetlabAsync(["device", "--sync", served.syncURL, "--key", served.rootKey, "--device-id", "tls-phone",
                                                            "--sequences", workflows, "--start", "payment-verification", "--ca-file", certificates.ca,
                                                            "--duration", "3s", "--data", dir.appendingPathComponent("device").path])
        #expect(device.status == 0, "\(device.stdout)\(device.stderr)")
        for line in ["registered tls-phone", "push channel open", "sync: sent"] {
            #expect(device.stdout.contains(line), "missing '\(line)' in:\n\(device.stdout)")
        }
        let untrusting = try await CommandRunner.fleetlabAsync(["device", "--sync", served.syncURL, "--key", served.rootKey, "--duration", "2s",
                                                                "--data", dir.appendingPathComponent("device-untrusting").path])
        #expect(untrusting.status != 0 && !untrusting.stdout.contains("registered"), "a certificate nobody vouches for: \(untrusting.stdout)\(untrusting.stderr)")
    }

    @Test("--advertise names the host phones reach: printed, and handed out in chat's discovery document and the AI bridge's pairing answer instead of loopback")
    func advertisedHost() async throws {
        // Bound to every interface; 127.0.0.2 is an address of this machine's loopback that
        // the servers were not told to bind, as a phone's view of a laptop's address is.
        let served = try await ServedFleetlab.start(data: TestPaths.scratchDirectory("serve-advertise").path,
                                                    extra: ["--host", "0.0.0.0", "--advertise", "127.0.0.2"])
        defer { served.stop() }
        for url in [served.syncURL, served.chatURL, served.hostURL, served.agentURL, served.aiBridgeURL] {
            #expect(url.hasPrefix("http://127.0.0.2:"), "\(url)")
        }
        let discovery = try #require(try await HTTPProbe.get(served.chatURL + "/.well-known/d3chat-server").json as? [String: Any])
        #expect(discovery["api_base_url"] as? String == served.chatURL + "/api/v1")
        let pairing = try await HTTPProbe.request("POST", served.aiBridgeURL + "/v1/pair/confirm", body: Data(#"{"pin":"\#(served.aiPIN)","device_id":"phone"}"#.utf8),
                                                  headers: ["content-type": "application/json"])
        #expect((pairing.json as? [String: Any])?["worker_url"] as? String == served.aiBridgeURL, "\(pairing.text)")

        let bad = try await CommandRunner.fleetlabAsync(["serve", "--advertise", "https://phones.example", "--data", TestPaths.scratchDirectory("serve-advertise-bad").path])
        #expect(bad.status == 2 && bad.stderr.contains("--advertise takes a host name or address alone"), "\(bad.stderr)")
    }

    @Test("a certificate serve cannot use is exit status 2 with the reason, before anything listens")
    func badCertificates() async throws {
        let dir = TestPaths.scratchDirectory("serve-tls-bad")
        let certificates = try TestCertificates(in: dir)
        let other = try TestCertificates(in: TestPaths.scratchDirectory("serve-tls-other"))
        let cases: [([String], String)] = [
            (["--tls-cert", certificates.serverCertificate], "--tls-cert needs --tls-key"),
            (["--tls-key", certificates.serverKey], "--tls-key needs --tls-cert"),
            (["--tls-cert", dir.path + "/missing.pem", "--tls-key", certificates.serverKey], "not a PEM certificate chain"),
            (["--tls-cert", certificates.serverCertificate, "--tls-key", certificates.serverCertificate], "not a PEM private key"),
            (["--tls-cert", certificates.serverCertificate, "--tls-key", other.serverKey], "is not the key of --tls-cert"),
        ]
        for (arguments, reason) in cases {
            let run = try await CommandRunner.fleetlabAsync(["serve", "--data", dir.path + "/data", "--port", "host=0", "--port", "mobile-sync=0", "--port", "chat=0",
                                                  "--port", "agent-runtime=0", "--port", "ai-bridge=0", "--port", "desktop-bridge=0"] + arguments, in: dir)
            #expect(run.status == 2 && run.stderr.contains(reason), "\(arguments): \(run.status) \(run.stderr)")
        }
    }
}
