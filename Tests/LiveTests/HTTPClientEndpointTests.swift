import Testing
@testable import Live

@Suite("HTTP client: where a request goes and what it says it is for")
struct HTTPClientEndpointTests {
    @Test("the Host header leaves out the scheme's own port, as a phone's HTTP stack does for a deployment behind a load balancer; https:// defaults to 443")
    func hostHeader() throws {
        #expect(HTTPClient.authority("sync.staging.example.com", 443, secure: true) == "sync.staging.example.com")
        #expect(HTTPClient.authority("sync.staging.example.com", 8443, secure: true) == "sync.staging.example.com:8443")
        #expect(HTTPClient.authority("127.0.0.1", 80, secure: false) == "127.0.0.1")
        #expect(HTTPClient.authority("127.0.0.1", 7710, secure: false) == "127.0.0.1:7710")
        #expect(HTTPClient.authority("::1", 7710, secure: false) == "[::1]:7710" && HTTPClient.authority("::1", 443, secure: true) == "[::1]",
                "an IPv6 literal in the Host header (and a proxy's CONNECT) in brackets")
        let endpoint = try HTTPClient.Endpoint("https://chat.staging.example.com", requiringPort: true)
        #expect(endpoint.port == 443 && endpoint.secure && endpoint.authority == "chat.staging.example.com")
        #expect(throws: HTTPClientError.self) { try HTTPClient.Endpoint("http://127.0.0.1", requiringPort: true) }
    }
}
