import Foundation
import LabKernel
import LabTestSupport
import NIOHTTP1
import Testing
@testable import Live

@Suite("Live clients through a proxy")
struct ClientProxyTests {
    /// A sync server on a free loopback port for `body` (its server and base URL).
    func withSyncServer(_ name: String, seed: UInt64, _ body: (MobileSyncLiveServer, String) async throws -> Void) async throws {
        let server = try MobileSyncLiveServer(dataDirectory: TestPaths.scratchDirectory(name).path, seed: seed)
        let host = LiveHost(configuration: .init(ports: [server.name: 0]), servers: [server])
        let base = try #require(try await host.start().first).url
        do { try await body(server, base) } catch {
            try? await host.stop()
            throw error
        }
        try await host.stop()
    }

    /// A phone's registration with the server's root key.
    static func registration(of device: String, key: String) -> HTTPRequestMessage {
        HTTPRequestMessage(method: "POST", target: "/api/v1/mobile/devices/register", headers: ["x-api-key": key, "content-type": "application/json"],
                           body: Array(#"{"device_id":"\#(device)","platform":"android"}"#.utf8))
    }

    @Test("which servers go through which proxy: --proxy for all but NO_PROXY; the environment's per scheme, loopback always direct; credentials never printed")
    func routes() throws {
        let proxy = try ClientProxy("http://alice:s3cret@proxy.corp.example:3128")
        #expect(proxy.host == "proxy.corp.example" && proxy.port == 3128 && proxy.authenticates)
        #expect(proxy.description == "http://proxy.corp.example:3128")
        #expect(try ClientProxy("proxy.corp.example").port == 80)
        #expect(throws: HTTPClientError.badURL("https://…@proxy.corp.example: a proxy is http://host:port (spoken to in plain HTTP) or socks5://host:port")) {
            try ClientProxy("https://alice:s3cret@proxy.corp.example")
        }
        let socks = try ClientProxy("socks5://alice:s3cret@bastion.corp.example")
        #expect(socks.kind == .socks5 && socks.port == 1080 && socks.authenticates && !socks.forwards)
        #expect(socks.description == "socks5://bastion.corp.example:1080")
        #expect(try ClientProxy("socks5h://127.0.0.1:9050").description == "socks5h://127.0.0.1:9050")
        // An HTTP proxy is handed http:// requests in absolute form, with its credentials; a
        // SOCKS5 tunnel carries them as they would go directly.
        let sync = try HTTPClient.Endpoint("http://sync.staging.example:7710")
        let request = Self.registration(of: "form", key: "k")
        let forwarded = HTTPClient.head(of: request, to: sync, via: proxy)
        #expect(forwarded.uri == "http://sync.staging.example:7710/api/v1/mobile/devices/register" && forwarded.headers["Proxy-Authorization"].count == 1)
        let tunnelled = HTTPClient.head(of: request, to: sync, via: socks)
        #expect(tunnelled.uri == "/api/v1/mobile/devices/register" && tunnelled.headers["Proxy-Authorization"].isEmpty)

        #expect(HTTPClient.hostPort("chat.staging.example.com", 443) == "chat.staging.example.com:443")
        #expect(HTTPClient.hostPort("::1", 80) == "[::1]:80", "a CONNECT names the port even when it is the scheme's")

        let every = ProxyRoutes.every(proxy, noProxy: "internal.example, .lan")
        #expect(every.proxy(for: "sync.staging.example.com", port: 443, secure: true) == proxy)
        #expect(every.proxy(for: "127.0.0.1", port: 80, secure: false) == proxy, "--proxy is asked for: loopback goes through it too")
        #expect(every.proxy(for: "api.internal.example", port: 443, secure: true) == nil && every.proxy(for: "internal.example", port: 80, secure: false) == nil)
        #expect(every.proxy(for: "printer.lan", port: 80, secure: false) == nil && every.proxy(for: "notinternal.example", port: 80, secure: false) == proxy)
        let ranges = ProxyRoutes.every(proxy, noProxy: "10.0.0.0/8,192.168.1.0/25,fd00::/8")
        #expect(ranges.proxy(for: "10.20.30.40", port: 443, secure: true) == nil && ranges.proxy(for: "11.0.0.1", port: 443, secure: true) == proxy)
        #expect(ranges.proxy(for: "192.168.1.127", port: 80, secure: false) == nil && ranges.proxy(for: "192.168.1.128", port: 80, secure: false) == proxy)
        #expect(ranges.proxy(for: "fd12::1", port: 443, secure: true) == nil && ranges.proxy(for: "fe80::1", port: 443, secure: true) == proxy)
        #expect(ranges.proxy(for: "sync.staging.example.com", port: 443, secure: true) == proxy, "a range holds addresses, not names")

        let ports = ProxyRoutes.every(proxy, noProxy: "sync.lan:8443, 10.0.0.5:80, [fd00::5]:443, [fd00::6], fd00::7")
        #expect(ports.proxy(for: "sync.lan", port: 8443, secure: true) == nil && ports.proxy(for: "sync.lan", port: 443, secure: true) == proxy,
                "host:port bypasses that port only")
        #expect(ports.proxy(for: "a.sync.lan", port: 8443, secure: true) == nil)
        #expect(ports.proxy(for: "10.0.0.5", port: 80, secure: false) == nil && ports.proxy(for: "10.0.0.5", port: 8080, secure: false) == proxy)
        #expect(ports.proxy(for: "fd00::5", port: 443, secure: true) == nil && ports.proxy(for: "fd00::5", port: 80, secure: false) == proxy)
        #expect(ports.proxy(for: "fd00::6", port: 9, secure: false) == nil && ports.proxy(for: "fd00:0::7", port: 9, secure: false) == nil,
                "an IPv6 literal, bracketed or not, any port, in any spelling")
        #expect(ports.proxy(for: "fd00::8", port: 443, secure: true) == proxy)

        let environment = try ProxyRoutes.environment(["https_proxy": "http://proxy.corp.example:3128", "NO_PROXY": "*.skip.example"])
        #expect(environment.proxy(for: "api.skip.example", port: 443, secure: true) == nil, "*.domain is .domain, as Go reads it")
        #expect(environment.proxy(for: "sync.staging.example.com", port: 443, secure: true)?.port == 3128)
        #expect(environment.proxy(for: "sync.staging.example.com", port: 80, secure: false) == nil, "no HTTP_PROXY: http:// goes direct")
        #expect(environment.proxy(for: "127.0.0.1", port: 443, secure: true) == nil && environment.proxy(for: "localhost", port: 443, secure: true) == nil)
        #expect(try ProxyRoutes.environment([:]) == .direct)
        let all = try ProxyRoutes.environment(["ALL_PROXY": "socks5://bastion:1080", "HTTPS_PROXY": "http://proxy.corp.example:3128"])
        #expect(all.proxy(for: "sync.staging.example.com", port: 80, secure: false)?.kind == .socks5, "ALL_PROXY for the scheme nothing else names")
        #expect(all.proxy(for: "sync.staging.example.com", port: 443, secure: true)?.kind == .http)
        #expect(try ProxyRoutes.environment(["NO_PROXY": "*", "HTTPS_PROXY": "proxy:8080"]).proxy(for: "a.example", port: 443, secure: true) == nil)
    }

    @Test("an http:// server through the proxy: each request in absolute form with the proxy's credentials, the push stream in a tunnel; without the credentials the proxy's 407 is the answer")
    func forwarded() async throws {
        try await withSyncServer("proxy-forwarded", seed: 3) { server, base in
            let proxy = try ForwardProxy(credentials: "load:gen")
            defer { proxy.stop() }
            let register = { (n: Int) in Self.registration(of: "proxied-\(n)", key: server.rootAPIKey) }

            let client = HTTPClient(proxies: .every(try ClientProxy(proxy.url(credentials: "load:gen")), noProxy: nil))
            defer { client.shutdown() }
            for n in 0..<3 { #expect(try await client.send(register(n), to: base, timeout: .seconds(30)).status == 201) }
            let port = try #require(URL(string: base)?.port)
            #expect(proxy.carried.forwarded == 3 && proxy.carried.tunnels == 0 && proxy.carried.destinations == ["127.0.0.1:\(port)"])

            // The push stream never ends, so it goes in a tunnel rather than being forwarded.
            let push = try await PushChannelClient.connect(baseURL: base, deviceID: "proxied-0", apiKey: server.rootAPIKey, proxies: client.proxies,
                                                           onWake: { _ in })
            push.close()
            #expect(proxy.carried.tunnels == 1 && proxy.carried.forwarded == 3)

            let anonymous = HTTPClient(proxies: .every(try ClientProxy(proxy.url()), noProxy: nil))
            defer { anonymous.shutdown() }
            #expect(try await anonymous.send(register(9), to: base, timeout: .seconds(30)).status == 407)
            #expect(proxy.carried.refused == 1 && proxy.carried.forwarded == 3)
        }
    }

    @Test("an https:// server through the proxy's CONNECT tunnel, TLS end to end; a tunnel the proxy refuses fails with its status, one to a proxy that is not there says so")
    func tunnelled() async throws {
        try await withSyncServer("proxy-tunnelled", seed: 4) { server, base in
            let dir = TestPaths.scratchDirectory("proxy-tunnel-tls")
            let certificates = try TestCertificates(in: dir)
            let front = try TLSProxy(certificates: certificates, backendPort: try #require(URL(string: base)?.port))
            defer { front.stop() }
            let proxy = try ForwardProxy(credentials: "load:gen")
            defer { proxy.stop() }
            let register = { (n: Int) in Self.registration(of: "tunnelled-\(n)", key: server.rootAPIKey) }

            let client = HTTPClient(tls: ClientTLS(caFile: certificates.ca), proxies: .every(try ClientProxy(proxy.url(credentials: "load:gen")), noProxy: nil))
            defer { client.shutdown() }
            for n in 0..<3 { #expect(try await client.send(register(n), to: front.url, timeout: .seconds(30)).status == 201) }
            #expect(proxy.carried.tunnels == 1 && proxy.carried.forwarded == 0, "one keep-alive tunnel carries the three requests")
            #expect(proxy.carried.destinations == ["127.0.0.1:\(front.port)"])

            let anonymous = HTTPClient(tls: ClientTLS(caFile: certificates.ca), proxies: .every(try ClientProxy(proxy.url()), noProxy: nil))
            defer { anonymous.shutdown() }
            await #expect(throws: HTTPClientError.proxyRefused(status: 407)) { try await anonymous.send(register(9), to: front.url, timeout: .seconds(5)) }
            #expect(ExchangeFailure.reason(HTTPClientError.proxyRefused(status: 407)) == "proxy refused (HTTP 407)")

            let gone = try ServedFleetlab.freePort()
            let nowhere = HTTPClient(tls: ClientTLS(caFile: certificates.ca), proxies: .every(try ClientProxy("http://127.0.0.1:\(gone)"), noProxy: nil))
            defer { nowhere.shutdown() }
            await #expect {
                try await nowhere.send(register(10), to: front.url, timeout: .seconds(5))
            } throws: { error in
                guard case HTTPClientError.unreachable(let what)? = error as? HTTPClientError else { return false }
                return what.hasPrefix("proxy http://127.0.0.1:\(gone)")
            }
        }
    }

    @Test("through a SOCKS5 proxy every connection is a tunnel: http:// requests in origin form on one keep-alive tunnel, the push stream in another; wrong or missing credentials and a refused target fail with the proxy's reason")
    func socks() async throws {
        try await withSyncServer("proxy-socks", seed: 5) { server, base in
            let proxy = try SOCKSProxy(credentials: "load:gen")
            defer { proxy.stop() }
            let register = { (n: Int) in Self.registration(of: "socks-\(n)", key: server.rootAPIKey) }
            let port = try #require(URL(string: base)?.port)

            let client = HTTPClient(proxies: .every(try ClientProxy(proxy.url(credentials: "load:gen")), noProxy: nil))
            defer { client.shutdown() }
            for n in 0..<3 { #expect(try await client.send(register(n), to: base, timeout: .seconds(30)).status == 201) }
            #expect(proxy.carried.tunnels == 1 && proxy.carried.destinations == ["127.0.0.1:\(port)"], "one keep-alive tunnel carries the three")

            let push = try await PushChannelClient.connect(baseURL: base, deviceID: "socks-0", apiKey: server.rootAPIKey, proxies: client.proxies,
                                                           onWake: { _ in })
            push.close()
            #expect(proxy.carried.tunnels == 2)

            let wrong = HTTPClient(proxies: .every(try ClientProxy(proxy.url(credentials: "load:guess")), noProxy: nil))
            defer { wrong.shutdown() }
            await #expect(throws: HTTPClientError.socksRefused("user or password refused")) { try await wrong.send(register(7), to: base, timeout: .seconds(30)) }
            let anonymous = HTTPClient(proxies: .every(try ClientProxy(proxy.url()), noProxy: nil))
            defer { anonymous.shutdown() }
            await #expect(throws: HTTPClientError.socksRefused("it asks for a user and password")) {
                try await anonymous.send(register(8), to: base, timeout: .seconds(30))
            }
            #expect(proxy.carried.refused == 2 && proxy.carried.tunnels == 2)

            let gone = try ServedFleetlab.freePort()
            await #expect(throws: HTTPClientError.socksRefused("connection refused")) {
                try await client.send(register(9), to: "http://127.0.0.1:\(gone)", timeout: .seconds(30))
            }
            #expect(ExchangeFailure.reason(HTTPClientError.socksRefused("connection refused")) == "proxy refused (SOCKS: connection refused)")
        }
    }
}
