import AgentRuntimeWire
public import LabKernel
public import Live

/// What an agent load test checks before its clock starts: that the runtime lists every
/// workflow the scenario's mix names. The app's client falls back to the runtime's entry
/// point when the one it wants is not listed, as an app should; a load test would then
/// measure another workflow than the scenario asked for, without a word.
public enum AgentListing {
    public struct Gap: Sendable, Equatable {
        /// The mix's workflows the runtime does not list.
        public var missing: [String]
        /// What it lists.
        public var listed: [String]
    }

    /// The gap between `wanted` and the listing of the runtime at `url` (asked with
    /// `token`); nil when there is none, or when it did not answer with a listing (the
    /// phones' own requests then show what is wrong, counted like any failure).
    public static func gap(_ wanted: [String], url: String, token: String?, timeout: Duration,
                           tls: ClientTLS = .system, proxies: ProxyRoutes = .direct) async -> Gap? {
        let http = HTTPClient(tls: tls, proxies: proxies)
        defer { http.shutdown() }
        let request = HTTPRequestMessage(method: "GET", path: RuntimePaths.workflows, headers: token.map { ["authorization": "Bearer " + $0] } ?? [:])
        guard let reply = try? await http.send(request, to: url, timeout: timeout), reply.status == 200,
              let listing = reply.jsonBody?.objectValue else { return nil }
        let missing = wanted.filter { listing[$0] == nil }
        return missing.isEmpty ? nil : Gap(missing: missing, listed: listing.keys.sorted())
    }
}
