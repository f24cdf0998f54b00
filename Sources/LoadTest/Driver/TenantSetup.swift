import LabKernel
public import Live

/// What a load test sets up on its target before the phones start, from the scenario: with
/// a root key, the scenario's sync tenant (`sync.tenant`) and its key, so a run against
/// `fleetlab serve` needs only the URL and the key it printed, and the run's devices sit in
/// a tenant of their own. With a tenant key, or a server without fleetlab's tenant route
/// (orch8's real server manages tenants elsewhere), or none answering, the key as given:
/// the phones' own requests then show what is wrong, counted like any failure.
public enum TenantSetup {
    public struct Outcome: Sendable, Equatable {
        /// The key the phones use.
        public var key: String
        /// The tenant created for the run, or nil when the key given is used.
        public var createdTenant: String?
    }

    /// Creates `tenant` (or, if it exists, `tenant-<runTag>`) when `key` is the server's root
    /// key; a 401 or 403 means it is a tenant key, used as given.
    public static func prepare(syncURL: String, key: String, tenant: String, runTag: String, timeout: Duration = .seconds(10),
                               tls: ClientTLS = .system, proxies: ProxyRoutes = .direct) async -> Outcome {
        let http = HTTPClient(tls: tls, proxies: proxies)
        defer { http.shutdown() }
        for name in [tenant, "\(tenant)-\(runTag)"] {
            var body: [UInt8] = []
            (["tenant_id": .string(name)] as JSONValue).write(to: &body)
            let request = HTTPRequestMessage(method: "POST", target: "/api/v1/mobile/tenants",
                                             headers: ["x-api-key": key, "content-type": "application/json"], body: body)
            guard let reply = try? await http.send(request, to: syncURL, timeout: timeout) else { break }
            if reply.status == 409 { continue }  // the scenario's tenant exists (an earlier run): one of this run's own
            guard reply.status == 201, let created = try? JSONValue.parse(bytes: reply.body), let tenantKey = created["api_key"]?.stringValue else { break }
            return Outcome(key: tenantKey, createdTenant: name)
        }
        return Outcome(key: key, createdTenant: nil)
    }
}
