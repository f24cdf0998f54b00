import Foundation
import Testing
import LabKernel
import LabStore
import LabTestSupport

@Suite("fleetlab loadtest through a forward proxy", .serialized)
struct LoadtestProxyTests {
    @Test("--proxy: sync over http:// forwarded in absolute form, chat over https:// and wss:// through CONNECT tunnels, the summary naming the proxy but not its password; a proxy that wants credentials refuses by why; HTTP_PROXY leaves loopback direct; a bad proxy URL is exit 2")
    func proxied() async throws {
        let served = try await ServedFleetlab.start(data: TestPaths.scratchDirectory("load-proxy-serve").path,
                                                    extra: ["--chat-auth-per-minute", "100000"])
        defer { served.stop() }
        let dir = TestPaths.scratchDirectory("loadtest-proxy")
        let certificates = try TestCertificates(in: dir)
        let chat = try TLSProxy(certificates: certificates, backendPort: LoadtestTLSTests.port(of: served.chatURL))
        let proxy = try ForwardProxy(credentials: "load:gen")
        defer { chat.stop(); proxy.stop() }
        let scenario = try writeScenario(loadScenario(extra: "chat: {groups: 0}"), in: dir, name: "load.yaml")
        let targets = ["--target", "sync=\(served.syncURL)", "--target", "chat=\(chat.url)", "--ca-file", certificates.ca]
        let common = ["--duration", "2s", "--devices", "4", "--think", "200ms", "--quiet"]
        let key = ["FLEETLAB_KEY_SYNC": served.rootKey]

        let through = try await CommandRunner.fleetlabAsync(["loadtest", scenario] + targets + common
                                                            + ["--proxy", proxy.url(credentials: "load:gen"), "--out", "through"], in: dir, environment: key)
        #expect(through.status == 0, "\(through.stdout)\(through.stderr)")
        let results = try ResultsDatabase.open(at: dir.appendingPathComponent("through/results.sqlite").path).load()
        #expect(results.total(allLabelsOf: "http.failures") == 0)
        #expect((results.total("loadtest.iterations", labels: "outcome=ok") ?? 0) >= 8)
        #expect(results.histogram(try #require(results.metric(named: "chat.delivery_latency", labels: "kind=dm"))).totalCount >= 4,
                "the messages went over wss:// sockets in tunnels and were decrypted on the partners' phones")
        let carried = proxy.carried
        #expect(carried.forwarded >= 8, "the tenant, the registrations and the syncs: \(carried)")
        #expect(carried.tunnels >= 8, "each chat phone's https:// connections and its socket: \(carried)")
        #expect(carried.destinations == ["127.0.0.1:\(LoadtestTLSTests.port(of: served.syncURL))", "127.0.0.1:\(chat.port)"])
        #expect(through.stdout.contains("(via proxy http://127.0.0.1:\(proxy.port))"), "\(through.stdout)")
        #expect(!through.stdout.contains("load:gen") && !through.stderr.contains("load:gen"), "the proxy's password is not printed")

        let anonymous = try await CommandRunner.fleetlabAsync(["loadtest", scenario, "--target", "sync=\(served.syncURL)"] + common
                                                              + ["--proxy", proxy.url(), "--out", "anonymous"], in: dir, environment: key)
        let refused = try ResultsDatabase.open(at: dir.appendingPathComponent("anonymous/results.sqlite").path).load()
        #expect((refused.total("http.errors", labels: "endpoint=POST /api/v1/mobile/devices/register,reason=HTTP 407,stack=sync") ?? 0) >= 4,
                "the proxy's 407 is each registration's answer: \(anonymous.stdout)")

        let before = proxy.carried
        let direct = try await CommandRunner.fleetlabAsync(["loadtest", scenario, "--target", "sync=\(served.syncURL)"] + common + ["--out", "direct"], in: dir,
                                                           environment: key.merging(["HTTP_PROXY": proxy.url()]) { $1 })
        #expect(direct.status == 0 && direct.stdout.contains("0 failed") && !direct.stdout.contains("via proxy"), "\(direct.stdout)\(direct.stderr)")
        #expect(proxy.carried == before, "loopback servers are reached directly whatever the environment's proxy")

        let bad = try await CommandRunner.fleetlabAsync(["loadtest", scenario, "--target", "sync=\(served.syncURL)", "--duration", "1s",
                                                         "--proxy", "https://load:gen@127.0.0.1:\(proxy.port)"], in: dir)
        #expect(bad.status == 2 && bad.stderr.contains("--proxy") && !bad.stderr.contains("load:gen"), "\(bad.stderr)")
    }

    @Test("--proxy socks5://: sync, chat over https:// and its wss:// sockets all in SOCKS5 tunnels, with the proxy's user and password; nothing fails, nothing secret printed")
    func socks() async throws {
        let served = try await ServedFleetlab.start(data: TestPaths.scratchDirectory("load-socks-serve").path,
                                                    extra: ["--chat-auth-per-minute", "100000"])
        defer { served.stop() }
        let dir = TestPaths.scratchDirectory("loadtest-socks")
        let certificates = try TestCertificates(in: dir)
        let chat = try TLSProxy(certificates: certificates, backendPort: LoadtestTLSTests.port(of: served.chatURL))
        let proxy = try SOCKSProxy(credentials: "load:gen")
        defer { chat.stop(); proxy.stop() }
        let scenario = try writeScenario(loadScenario(extra: "chat: {groups: 0}"), in: dir, name: "load.yaml")
        let run = try await CommandRunner.fleetlabAsync(["loadtest", scenario, "--target", "sync=\(served.syncURL)", "--target", "chat=\(chat.url)",
                                                         "--ca-file", certificates.ca, "--duration", "2s", "--devices", "4", "--think", "200ms", "--quiet",
                                                         "--proxy", proxy.url(credentials: "load:gen"), "--out", "socks"],
                                                        in: dir, environment: ["FLEETLAB_KEY_SYNC": served.rootKey])
        #expect(run.status == 0, "\(run.stdout)\(run.stderr)")
        let results = try ResultsDatabase.open(at: dir.appendingPathComponent("socks/results.sqlite").path).load()
        #expect(results.total(allLabelsOf: "http.failures") == 0)
        #expect(results.histogram(try #require(results.metric(named: "chat.delivery_latency", labels: "kind=dm"))).totalCount >= 4)
        let carried = proxy.carried
        #expect(carried.tunnels >= 8 && carried.refused == 0, "\(carried)")
        #expect(carried.destinations == ["127.0.0.1:\(LoadtestTLSTests.port(of: served.syncURL))", "127.0.0.1:\(chat.port)"])
        #expect(run.stdout.contains("(via proxy socks5://127.0.0.1:\(proxy.port))"), "\(run.stdout)")
        #expect(!run.stdout.contains("load:gen") && !run.stderr.contains("load:gen"))
    }

    @Test("--connections: each phone keeps a connection of its own by default (the server sees one per phone); shared, the phones' requests go on a pool of a few")
    func connections() async throws {
        let (served, dir, scenario) = try await servedLoad("load-connections-serve", "loadtest-connections")
        defer { served.stop() }
        // A SOCKS5 proxy makes every connection a tunnel, so its tally counts them.
        var tunnels: [String: Int] = [:]
        for model in ["phone", "shared"] {
            let proxy = try SOCKSProxy()
            defer { proxy.stop() }
            let run = try await CommandRunner.fleetlabAsync(["loadtest", scenario, "--target", "sync=\(served.syncURL)", "--duration", "2s", "--devices", "8",
                                                             "--think", "100ms", "--connections", model, "--proxy", proxy.url(), "--quiet", "--out", model],
                                                            in: dir, environment: ["FLEETLAB_KEY_SYNC": served.rootKey])
            #expect(run.status == 0, "\(run.stdout)\(run.stderr)")
            let results = try ResultsDatabase.open(at: dir.appendingPathComponent("\(model)/results.sqlite").path).load()
            #expect(results.total(allLabelsOf: "http.failures") == 0)
            #expect((results.total("loadtest.iterations", labels: "outcome=ok") ?? 0) >= 40, "\(run.stdout)")
            tunnels[model] = proxy.carried.tunnels
            #expect(run.stdout.contains(model == "phone" ? "; a keep-alive connection per phone" : "; one pool of connections for every phone"), "\(run.stdout)")
        }
        // The tenant's set-up has a connection of its own; each phone then keeps one for its
        // register and its ten or so syncs.
        #expect(tunnels["phone"] == 9, "\(tunnels)")
        #expect((tunnels["shared"] ?? 99) <= 9, "at most one for each request in flight at once (4 here when the machine is idle): \(tunnels)")
        let bad = try await CommandRunner.fleetlabAsync(["loadtest", scenario, "--target", "sync=\(served.syncURL)", "--duration", "1s", "--connections", "each"], in: dir)
        #expect(bad.status == 2 && bad.stderr.contains("--connections"), "\(bad.stderr)")
    }
}
