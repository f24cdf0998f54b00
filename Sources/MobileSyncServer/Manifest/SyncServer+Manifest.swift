import Orch8Wire
import LabCrypto
import LabKernel

/// The signed manifest publisher (wire-notes §a, `orch8-publisher`): sequences are served
/// with their SHA-256 and a detached Ed25519 signature by a signing key; the manifest
/// listing them is `<base64 root signature>\n<canonical JSON>`, signed by the root key.
///
/// Layout: `/{tenant}/manifest.json`, `/{tenant}/sequences/{sha256}.json` and `.sig`
/// (tenant `_` in no-auth mode). Sequence URLs in the manifest are absolute
/// (`config.baseURL` + path): the publisher writes relative ones, which the SDK cannot
/// fetch. Fetching needs a key of the tenant (`Authorization: Bearer` or `x-api-key`).
extension SyncServer {
    static func tenantPath(_ tenant: String) -> String { tenant.isEmpty ? "_" : tenant }
    static func tenant(fromPath path: String) -> String { path == "_" ? "" : path }

    /// Signing keys in rotation order, oldest first.
    var orderedSigningKeys: [SigningKeyRecord] {
        state.manifest.signingKeys.values.sorted { ($0.createdAt, $0.keyID) < ($1.createdAt, $1.keyID) }
    }

    var currentSigningKey: SigningKeyRecord? { orderedSigningKeys.last { !$0.revoked } }

    @discardableResult
    mutating func rotateSigningKey(now: Instant) -> SigningKeyRecord {
        let seed = randomBytes(32)
        let key = try! Ed25519.SigningKey(seed: seed)  // 32 bytes by construction
        let record = SigningKeyRecord(keyID: "signing-\(state.manifest.signingKeys.count + 1)", seedHex: seed.hexString,
                                      publicKey: Base64.encode(key.publicKey), createdAt: timestamp(now), revoked: false)
        state.put(record)
        return record
    }

    func signingKey(_ record: SigningKeyRecord) -> Ed25519.SigningKey? {
        [UInt8](hex: record.seedHex).flatMap { try? Ed25519.SigningKey(seed: $0) }
    }

    func signWithCurrentKey(_ bytes: [UInt8]) -> (keyID: String, signature: String)? {
        guard let record = currentSigningKey, let key = signingKey(record) else { return nil }
        return (record.keyID, Base64.encode(key.sign(bytes)))
    }

    var rootSigningKey: Ed25519.SigningKey? {
        state.meta[Self.manifestRootSeedMeta].flatMap { [UInt8](hex: $0) }.flatMap { try? Ed25519.SigningKey(seed: $0) }
    }

    /// `GET /mobile/manifest/root-key`: what a device configures as `rootPublicKey`.
    func rootKey() -> HTTPResponseMessage {
        guard let key = rootSigningKey else { return .error(503, "unavailable", "the server has no manifest root key yet") }
        return .json(200, ["public_key": .string(Base64.encode(key.publicKey)), "algorithm": "ed25519"])
    }

    func listSigningKeys(caller: Caller) -> HTTPResponseMessage {
        let items = orderedSigningKeys.map { key -> JSONValue in
            ["key_id": .string(key.keyID), "public_key": .string(key.publicKey), "created_at": .string(key.createdAt), "revoked": .bool(key.revoked)]
        }
        return .json(200, ["items": .array(items), "total": .number(Double(items.count))])
    }

    mutating func rotateKey(caller: Caller, now: Instant) throws -> HTTPResponseMessage {
        try requireRoot(caller)
        let key = rotateSigningKey(now: now)
        return .json(201, ["key_id": .string(key.keyID), "public_key": .string(key.publicKey)])
    }

    /// Revokes a signing key: it leaves every manifest, and what it signed is signed again
    /// with the current key (a new one if it was the last).
    mutating func revokeKey(id: String, caller: Caller, now: Instant) throws -> HTTPResponseMessage {
        try requireRoot(caller)
        guard var key = state.manifest.signingKeys[id], !key.revoked else { throw APIError(404, "not found", "signing key \(id) not found or already revoked") }
        key.revoked = true
        state.put(key)
        if currentSigningKey == nil { rotateSigningKey(now: now) }
        var tenants: Set<String> = []
        for sequence in state.manifest.sequences.values where sequence.signingKeyID == id {
            var resigned = sequence
            guard let signed = signWithCurrentKey(Array(sequence.json.utf8)) else { continue }
            resigned.signingKeyID = signed.keyID
            resigned.signature = signed.signature
            state.put(resigned)
            tenants.insert(sequence.tenantID)
        }
        tenants.formUnion(state.manifest.versions.keys)
        for tenant in tenants.sorted() { bumpVersion(tenant, now: now) }
        return .json(200, ["key_id": .string(id), "revoked": true])
    }

    mutating func bumpVersion(_ tenant: String, now: Instant) {
        let next = max((state.manifest.versions[tenant] ?? 0) + 1, unixMs(now))
        state.bumpManifestVersion(tenant: tenant, to: next)
    }

    /// `POST /mobile/manifest/sequences {sequence, required_handlers?, min_sdk_version?}`.
    mutating func publishSequence(_ request: HTTPRequestMessage, caller: Caller, now: Instant) throws -> HTTPResponseMessage {
        let f = try fields(request)
        guard let sequenceJSON = f.optionalValue("sequence"), sequenceJSON.objectValue != nil else {
            throw APIError(400, "invalid argument", "sequence is required: an orch8 sequence definition object")
        }
        let text = sequenceJSON.canonicalText
        let loaded: Result<SequenceLoader.Loaded, SequenceValidationError> = Result { () throws(SequenceValidationError) in
            try SequenceLoader(registeredHandlers: nil).load(text)
        }
        guard case .success(let result) = loaded else {
            if case .failure(let error) = loaded {
                throw APIError(400, "invalid argument", "the sequence is not valid: " + error.problems.map(\.description).joined(separator: "; "))
            }
            throw APIError(400, "invalid argument", "the sequence is not valid")
        }
        let sequence = result.sequence
        let required: [String]
        let minSDK: String
        do {
            required = try f.array("required_handlers") { v, p throws(JSONFieldError) in
                guard let name = v.stringValue, !name.isEmpty else { throw JSONFieldError(path: p, message: "must be a handler name") }
                return name
            }
            minSDK = try f.optionalString("min_sdk_version") ?? "0.1.0"
        } catch { throw APIError.from(error) }
        guard SDKVersion(minSDK) != nil else {
            throw APIError(400, "invalid argument", "min_sdk_version must be dotted numbers like 0.7.1, got '\(minSDK)'")
        }
        let tenant = owner(caller)
        if let current = state.manifest.sequences[PublishedSequence.key(tenant, sequence.name)], current.version >= sequence.version {
            throw APIError(409, "conflict", "\(sequence.name) version \(sequence.version) is not newer than the published version \(current.version)")
        }
        let bytes = Array(text.utf8)
        guard let signed = signWithCurrentKey(bytes) else { throw APIError(503, "unavailable", "no signing key") }
        let keyID = signed.keyID
        let published = PublishedSequence(
            tenantID: tenant, name: sequence.name, version: sequence.version, json: text, sha256: SHA256.hash(bytes).hexString,
            signature: signed.signature, signingKeyID: keyID, requiredHandlers: required.isEmpty ? sequence.handlers : required.sorted(),
            minSDKVersion: minSDK, publishedAt: timestamp(now))
        state.put(published)
        bumpVersion(tenant, now: now)
        return .json(201, ["name": .string(published.name), "version": .number(Double(published.version)),
                           "sha256": .string(published.sha256), "url": .string(url(of: published)),
                           "signing_key_id": .string(keyID), "manifest_version": .number(Double(state.manifest.versions[tenant] ?? 0))])
    }

    /// `DELETE /mobile/manifest/sequences/{name}`: listed under `removed` from now on.
    mutating func removeSequence(name: String, caller: Caller, now: Instant) throws -> HTTPResponseMessage {
        let tenant = owner(caller)
        guard state.manifest.sequences[PublishedSequence.key(tenant, name)] != nil else {
            throw APIError(404, "not found", "sequence \(name) is not published")
        }
        state.remove(sequence: name, tenant: tenant, at: timestamp(now))
        bumpVersion(tenant, now: now)
        return .json(200, ["name": .string(name), "manifest_version": .number(Double(state.manifest.versions[tenant] ?? 0))])
    }

    func url(of sequence: PublishedSequence) -> String {
        "\(config.baseURL)/\(PercentEncoding.encode(Self.tenantPath(sequence.tenantID)))/sequences/\(sequence.sha256).json"
    }

    /// The manifest's canonical JSON for a tenant.
    func manifestDocument(tenant: String) -> JSONValue {
        let keys = orderedSigningKeys.filter { !$0.revoked }.map { key -> JSONValue in
            ["key_id": .string(key.keyID), "public_key": .string(key.publicKey)]
        }
        let sequences = state.manifest.sequences.values.filter { $0.tenantID == tenant }.sorted { $0.name < $1.name }.map { s -> JSONValue in
            ["name": .string(s.name), "version": .number(Double(s.version)), "url": .string(url(of: s)),
             "signing_key_id": .string(s.signingKeyID), "sha256": .string(s.sha256),
             "required_handlers": .array(s.requiredHandlers.map(JSONValue.string)), "min_sdk_version": .string(s.minSDKVersion)]
        }
        let removed = state.manifest.removed.values.filter { $0.tenantID == tenant }.sorted { $0.name < $1.name }.map { r -> JSONValue in
            ["name": .string(r.name), "removed_at": .string(r.removedAt)]
        }
        let version = state.manifest.versions[tenant] ?? 0
        return ["signing_keys": .array(keys), "sequences": .array(sequences), "removed": .array(removed),
                "manifest_version": .number(Double(version)), "generated_at": .string(RFC3339.format(unixMilliseconds: version))]
    }

    /// `GET /{tenant}/manifest.json`, with an ETag; `If-None-Match` answers 304.
    func serveManifest(tenant path: String, request: HTTPRequestMessage, now: Instant) throws -> HTTPResponseMessage {
        let tenant = Self.tenant(fromPath: path)
        let caller = try authenticate(request, now: now)
        guard caller.sees(tenant) else { throw APIError(404, "not found", "no manifest for \(path)") }
        guard let root = rootSigningKey else { throw APIError(503, "unavailable", "the server has no manifest root key yet") }
        let canonical = manifestDocument(tenant: tenant).canonicalText
        let body = Base64.encode(root.sign(Array(canonical.utf8))) + "\n" + canonical
        let etag = "\"" + String(SHA256.hash(body).hexString.prefix(32)) + "\""
        let headers = [HTTPHeader("ETag", etag), HTTPHeader("Cache-Control", "max-age=60")]
        if request.header("if-none-match") == etag { return .empty(304, headers: headers) }
        return HTTPResponseMessage(status: 200, headers: [HTTPHeader("Content-Type", "text/plain; charset=utf-8")] + headers,
                                   body: Array(body.utf8))
    }

    /// `GET /{tenant}/sequences/{sha256}.json` (the exact bytes) or `.sig` (base64).
    func serveSequenceFile(tenant path: String, file: String, request: HTTPRequestMessage, now: Instant) throws -> HTTPResponseMessage {
        let tenant = Self.tenant(fromPath: path)
        let caller = try authenticate(request, now: now)
        guard caller.sees(tenant) else { throw APIError(404, "not found", "no such sequence") }
        let isSignature = file.hasSuffix(".sig")
        let hash = String(file.dropLast(isSignature ? 4 : 5))
        guard isSignature || file.hasSuffix(".json"),
              let sequence = state.manifest.sequences.values.first(where: { $0.tenantID == tenant && $0.sha256 == hash }) else {
            throw APIError(404, "not found", "no sequence \(file)")
        }
        if isSignature {
            return HTTPResponseMessage(status: 200, headers: [HTTPHeader("Content-Type", "text/plain")], body: Array(sequence.signature.utf8))
        }
        return HTTPResponseMessage(status: 200, headers: [HTTPHeader("Content-Type", "application/json")], body: Array(sequence.json.utf8))
    }

    /// `GET /{tenant}/sequences.json`: every published sequence of the tenant as one JSON
    /// array, by name (the seed's bundled `sequences.json`, what `loadSequencesFromUrl`
    /// reads). Unsigned: a device that wants signatures uses the manifest.
    func serveSequenceList(tenant path: String, request: HTTPRequestMessage, now: Instant) throws -> HTTPResponseMessage {
        let tenant = Self.tenant(fromPath: path)
        let caller = try authenticate(request, now: now)
        guard caller.sees(tenant) else { throw APIError(404, "not found", "no sequences for \(path)") }
        let published = state.manifest.sequences.values.filter { $0.tenantID == tenant }.sorted { $0.name < $1.name }
        let body = "[" + published.map(\.json).joined(separator: ",") + "]"
        return HTTPResponseMessage(status: 200, headers: [HTTPHeader("Content-Type", "application/json")], body: Array(body.utf8))
    }
}

