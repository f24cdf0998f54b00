import LabCrypto
import LabKernel

/// Who is calling: a tenant, or the root key / no-auth mode (`tenant` empty), which sees
/// every tenant's rows.
struct Caller: Equatable {
    var tenant: String
    var isRoot: Bool

    /// Whether a row of `owner` is visible to this caller; invisible rows are 404s.
    func sees(_ owner: String) -> Bool { tenant.isEmpty || tenant == owner }
}

extension SyncServer {
    /// `x-api-key` (or `Authorization: Bearer`): the root key, with the tenant from
    /// `X-Tenant-Id` if given, or a tenant's key, which a different `X-Tenant-Id` may not
    /// override (403). Missing or unknown keys are 401.
    func authenticate(_ request: HTTPRequestMessage, now: Instant) throws -> Caller {
        let requested = request.header("x-tenant-id").flatMap { $0.isEmpty ? nil : $0 }
        guard config.authRequired else { return Caller(tenant: requested ?? "", isRoot: true) }
        var key = request.header("x-api-key")
        if key == nil, let authorization = request.header("authorization"), authorization.lowercased().hasPrefix("bearer ") {
            key = String(authorization.dropFirst(7))
        }
        if key == nil, let session = try dashboardSession(request, now: now) {
            return Caller(tenant: session.tenant, isRoot: session.isRoot)
        }
        guard let key, !key.isEmpty else { throw APIError(401, "unauthorized", "an x-api-key header is required") }
        if let root = state.meta[Self.rootKeyMeta], ConstantTimeText.equal(key, root) {
            return Caller(tenant: requested ?? "", isRoot: true)
        }
        guard let tenant = state.tenant(forKey: key) else { throw APIError(401, "unauthorized", "the x-api-key is not valid") }
        if let requested, requested != tenant {
            throw APIError(403, "forbidden", "this key belongs to tenant \(tenant), not \(requested)")
        }
        return Caller(tenant: tenant, isRoot: false)
    }

    func requireRoot(_ caller: Caller) throws {
        guard caller.isRoot else { throw APIError(403, "forbidden", "this needs the root API key") }
    }

    /// The tenant new rows of this caller belong to.
    func owner(_ caller: Caller) -> String { caller.tenant }

    // MARK: Tenants (fleetlab's addition: the real server manages tenants elsewhere)

    mutating func createTenant(_ request: HTTPRequestMessage, caller: Caller, now: Instant) throws -> HTTPResponseMessage {
        try requireRoot(caller)
        let f = try fields(request)
        let id: String
        do { id = try f.name("tenant_id") } catch { throw APIError.from(error) }
        guard id.utf8.count <= 128, id.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" || $0 == "." }) else {
            throw APIError(400, "invalid argument", "tenant_id may hold letters, digits, - _ . (at most 128), got '\(id)'")
        }
        guard state.tenants[id] == nil else { throw APIError(409, "conflict", "tenant \(id) already exists") }
        let key = "fl_\(id)_" + randomToken(20)
        let tenant = TenantRecord(tenantID: id, apiKeyHash: Self.keyHash(key), createdAt: timestamp(now))
        state.put(tenant)
        // The only time the key is shown: the server keeps its hash.
        return .json(201, ["tenant_id": .string(id), "api_key": .string(key), "created_at": .string(tenant.createdAt)])
    }

    /// What an API key (or a dashboard session token) is stored and looked up as.
    public static func keyHash(_ key: String) -> String { SHA256.hash(key).hexString }

    func listTenants(caller: Caller) throws -> HTTPResponseMessage {
        try requireRoot(caller)
        let items = state.tenants.values.sorted { $0.tenantID < $1.tenantID }
            .map { JSONValue.object(["tenant_id": .string($0.tenantID), "created_at": .string($0.createdAt)]) }
        return .json(200, ["items": .array(items), "total": .number(Double(items.count))])
    }
}

/// Compares keys without leaking where they differ.
enum ConstantTimeText {
    static func equal(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8), y = Array(b.utf8)
        guard x.count == y.count else { return false }
        var difference: UInt8 = 0
        for index in x.indices { difference |= x[index] ^ y[index] }
        return difference == 0
    }
}
