import Foundation
import Testing
import LabKernel
import LabStore
import LabTestSupport

@Suite("fleetlab loadtest over TLS", .serialized)
struct LoadtestTLSTests {
    @Test("https:// and wss:// targets behind a TLS front signed by the deployment's own CA: trusted with --ca-file, refused by why without it, unchecked with --insecure (and the summary says so)")
    func staging() async throws {
        let served = try await ServedFleetlab.start(data: TestPaths.scratchDirectory("load-tls-serve").path,
                                                    extra: ["--chat-auth-per-minute", "100000"])
        defer { served.stop() }
        let dir = TestPaths.scratchDirectory("loadtest-tls")
        let certificates = try TestCertificates(in: dir)
        let sync = try TLSProxy(certificates: certificates, backendPort: Self.port(of: served.syncURL))
        let chat = try TLSProxy(certificates: certificates, backendPort: Self.port(of: served.chatURL))
        defer { sync.stop(); chat.stop() }
        let scenario = try writeScenario(loadScenario(extra: "chat: {groups: 0}"), in: dir, name: "load.yaml")
        let targets = ["--target", "sync=\(sync.url)", "--target", "chat=\(chat.url)"]
        let common = ["--duration", "2s", "--devices", "4", "--think", "200ms", "--quiet"]

        let trusted = try await CommandRunner.fleetlabAsync(["loadtest", scenario] + targets + common + ["--ca-file", certificates.ca, "--out", "trusted"], in: dir,
                                                            environment: ["FLEETLAB_KEY_SYNC": served.rootKey])
        #expect(trusted.status == 0, "\(trusted.stdout)\(trusted.stderr)")
        let results = try ResultsDatabase.open(at: dir.appendingPathComponent("trusted/results.sqlite").path).load()
        #expect(results.total(allLabelsOf: "http.failures") == 0)
        #expect((results.total("loadtest.iterations", labels: "outcome=ok") ?? 0) >= 8)
        // The chat messages went over the sockets (wss://) and were decrypted on the partners' phones.
        #expect(results.histogram(try #require(results.metric(named: "chat.delivery_latency", labels: "kind=dm"))).totalCount >= 4)
        #expect(trusted.stdout.contains("(tenant fleet, created for this run)"), "the tenant set-up went over TLS too")

        let untrusted = try await CommandRunner.fleetlabAsync(["loadtest", scenario, "--target", "sync=\(sync.url)"] + common + ["--out", "untrusted"], in: dir,
                                                              environment: ["FLEETLAB_KEY_SYNC": served.rootKey])
        let refused = try ResultsDatabase.open(at: dir.appendingPathComponent("untrusted/results.sqlite").path).load()
        #expect((refused.total("http.errors", labels: "endpoint=POST /api/v1/mobile/devices/register,reason=TLS handshake failed,stack=sync") ?? 0) >= 4,
                "a certificate nobody vouches for is refused: \(untrusted.stdout)")

        let insecure = try await CommandRunner.fleetlabAsync(["loadtest", scenario, "--target", "sync=\(sync.url)"] + common + ["--insecure", "--out", "insecure"],
                                                             in: dir, environment: ["FLEETLAB_KEY_SYNC": served.rootKey])
        #expect(insecure.status == 0 && insecure.stdout.contains("0 failed"), "\(insecure.stdout)\(insecure.stderr)")
        #expect(insecure.stdout.contains("(TLS certificates not checked: --insecure)"))

        let missing = try await CommandRunner.fleetlabAsync(["loadtest", scenario, "--target", "sync=\(sync.url)", "--ca-file", dir.path + "/nope.pem",
                                                             "--duration", "1s"], in: dir)
        #expect(missing.status == 2 && missing.stderr.contains("--ca-file"), "\(missing.stderr)")
        let both = try await CommandRunner.fleetlabAsync(["loadtest", scenario, "--target", "sync=\(sync.url)", "--ca-file", certificates.ca, "--insecure",
                                                          "--duration", "1s"], in: dir)
        #expect(both.status == 2 && both.stderr.contains("not both"))
    }
}

extension LoadtestTLSTests {
    /// The port of a server `fleetlab serve` printed, for a TLS front before it.
    static func port(of url: String) -> Int { Int(url.split(separator: ":").last ?? "") ?? 0 }

    @Test("a deployment that asks for a client certificate (mutual TLS): served with --client-cert and --client-key, refused without; one without the other is exit 2")
    func mutualTLS() async throws {
        let served = try await ServedFleetlab.start(data: TestPaths.scratchDirectory("load-mtls-serve").path)
        defer { served.stop() }
        let dir = TestPaths.scratchDirectory("loadtest-mtls")
        let certificates = try TestCertificates(in: dir)
        let sync = try TLSProxy(certificates: certificates, backendPort: Self.port(of: served.syncURL), requireClientCertificate: true)
        defer { sync.stop() }
        let scenario = try writeScenario(loadScenario(), in: dir, name: "load.yaml")
        let common = ["--target", "sync=\(sync.url)", "--duration", "2s", "--devices", "4", "--think", "200ms", "--quiet", "--ca-file", certificates.ca]

        let presented = try await CommandRunner.fleetlabAsync(["loadtest", scenario] + common
                                                              + ["--client-cert", certificates.clientCertificate, "--client-key", certificates.clientKey, "--out", "presented"],
                                                              in: dir, environment: ["FLEETLAB_KEY_SYNC": served.rootKey])
        #expect(presented.status == 0, "\(presented.stdout)\(presented.stderr)")
        let results = try ResultsDatabase.open(at: dir.appendingPathComponent("presented/results.sqlite").path).load()
        #expect(results.total(allLabelsOf: "http.failures") == 0)
        #expect((results.total("loadtest.iterations", labels: "outcome=ok") ?? 0) >= 8)

        let without = try await CommandRunner.fleetlabAsync(["loadtest", scenario] + common + ["--out", "without"], in: dir,
                                                            environment: ["FLEETLAB_KEY_SYNC": served.rootKey])
        let refused = try ResultsDatabase.open(at: dir.appendingPathComponent("without/results.sqlite").path).load()
        #expect((refused.total("loadtest.iterations", labels: "outcome=ok") ?? 0) == 0, "no certificate, no request served: \(without.stdout)")
        #expect(refused.total(allLabelsOf: "http.errors") >= 4)

        let half = try await CommandRunner.fleetlabAsync(["loadtest", scenario] + common + ["--client-cert", certificates.clientCertificate], in: dir)
        #expect(half.status == 2 && half.stderr.contains("--client-cert needs --client-key"), "\(half.stderr)")
        let notKey = try await CommandRunner.fleetlabAsync(["loadtest", scenario] + common
                                                           + ["--client-cert", certificates.clientCertificate, "--client-key", certificates.clientCertificate], in: dir)
        #expect(notKey.status == 2 && notKey.stderr.contains("--client-key") && notKey.stderr.contains("not a PEM private key"), "\(notKey.stderr)")
    }
}
