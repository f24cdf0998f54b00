public import LabKernel
public import DeviceWorkflows
import Orch8Wire
import LabCrypto

/// The SDK's `sync(manifestUrl, tokenProvider)`: signed manifest sync (wire-notes §a).
///
/// Theory of operation. The manifest is `<base64 Ed25519 signature>\n<canonical JSON>`,
/// signed by the root key the app is configured with. A manifest whose version is not
/// newer than the last one applied is a replay and changes nothing. Its `signing_keys`
/// replace the cached ones (a key that left is revoked). Each listed sequence is
/// skipped when it needs a newer SDK or a handler the app does not register, left alone
/// when the device already has that version, and otherwise downloaded, its SHA-256 and
/// its signature (by the named signing key) checked, and loaded; a failure of either
/// check or of the parse counts as a signature failure, a failed download as skipped,
/// and neither stops the others. `removed` entries (younger than 30 days) unload their
/// sequence. Loading beyond `maxStoredSequences` evicts the oldest unused sequence.
///
/// The root key is read as the seed's hex (64 digits) or the real SDK's base64 of the 32
/// bytes; an empty key is the seed's "verification off": signatures are not checked
/// (hashes still are) and the result carries a warning saying so.
///
/// The fetching is the driver's: it answers each `ManifestFetch` (and owns retries,
/// with `ManifestFetchRetry` for the delays).
extension EngineHost {
    static var manifestVersionKey: String { "manifest_version" }
    static var manifestETagKey: String { "manifest_etag" }
    static var manifestKeysKey: String { "manifest_signing_keys" }
    static var manifestLastSyncKey: String { "manifest_last_sync_ms" }

    public mutating func syncManifest(
        url: String, token: String?, fetch: (ManifestFetch) throws -> ManifestFetchReply
    ) throws(ManifestSyncError) -> ManifestSyncResult {
        let root = try ManifestRootKey(engine.config.rootPublicKey)
        let first = manifestRequest(url: url, token: token)
        let headers = first.headers.filter { $0.key != "if-none-match" }
        let reply: ManifestFetchReply
        do { reply = try fetch(first) } catch { throw .network("\(error)") }
        if reply.status == 304 { return ManifestSyncResult() }
        guard reply.status == 200 else { throw .network("the manifest answered HTTP \(reply.status)") }
        guard let newline = reply.body.firstIndex(of: UInt8(ascii: "\n")) else { throw .invalidManifest("no signature line") }
        guard let signature = Base64.decode(String(decoding: reply.body[..<newline], as: UTF8.self)) else {
            throw .signatureInvalid("the signature line is not base64")
        }
        let canonical = Array(reply.body[reply.body.index(after: newline)...])
        guard root.accepts(signature: signature, message: canonical) else {
            throw .signatureInvalid("the manifest is not signed by the root key")
        }
        let manifest: ManifestDocument
        do { manifest = try ManifestDocument(json: try JSONValue.parse(bytes: canonical)) } catch { throw .invalidManifest("\(error)") }
        let last = (try? store.syncValue(Self.manifestVersionKey)).flatMap { $0.flatMap(Int64.init) } ?? 0
        guard manifest.version > last else { return ManifestSyncResult() }

        var result = ManifestSyncResult()
        if case .verificationOff = root { result.warnings.append(ManifestRootKey.offWarning) }
        var effects: [EngineEffect] = []
        let sdk = SDKVersion(engine.config.sdkVersion)
        for entry in manifest.sequences {
            if let needed = SDKVersion(entry.minSDKVersion), let sdk, needed <= sdk {} else {
                result.skipped += 1
                continue
            }
            if !entry.requiredHandlers.allSatisfy(engine.handlers.contains) {
                result.skipped += 1
                continue
            }
            let local = engine.sequence(named: entry.name)?.version
            if let local, local >= entry.version { continue }
            guard let bytes = try? fetch(ManifestFetch(url: entry.url, headers: headers)), bytes.status == 200 else {
                result.skipped += 1
                continue
            }
            guard SHA256.hash(bytes.body).hexString == entry.sha256.lowercased(),
                  root == .verificationOff || verifySequence(entry, bytes.body, manifest, headers: headers, fetch: fetch) else {
                result.signatureFailures += 1
                continue
            }
            do {
                let info = try engine.loadSequence(json: String(decoding: bytes.body, as: UTF8.self), into: &effects)
                guard info.name == entry.name, info.version == entry.version else {
                    result.signatureFailures += 1
                    continue
                }
            } catch {
                result.signatureFailures += 1
                continue
            }
            if local == nil { result.added += 1 } else { result.updated += 1 }
        }
        let nowMs = wallClock.unixMilliseconds(at: now)
        let thirtyDays: Int64 = 30 * 86_400_000
        for removed in manifest.removed {
            if let at = RFC3339.parse(removed.removedAt), nowMs - at > thirtyDays { continue }
            guard engine.sequence(named: removed.name) != nil else { continue }
            engine.unloadSequence(named: removed.name, into: &effects)
            result.removed += 1
        }
        let lastSync = (try? store.syncValue(Self.manifestLastSyncKey)).flatMap { $0.flatMap(Int64.init) }
        if let lastSync, nowMs - lastSync > thirtyDays {
            let listed = Set(manifest.sequences.map(\.name))
            for info in engine.loadedSequences() where !listed.contains(info.name) && engine.sequence(named: info.name) != nil {
                engine.unloadSequence(named: info.name, into: &effects)
                result.removed += 1
            }
        }
        do {
            try apply(&effects)
            try openBatch()
            try store.setSyncValue(Self.manifestVersionKey, String(manifest.version))
            try store.setSyncValue(Self.manifestETagKey, reply.headers["etag"])
            try store.setSyncValue(Self.manifestKeysKey, manifest.keysJSON.canonicalText)
            try store.setSyncValue(Self.manifestLastSyncKey, String(nowMs))
            try commitIfNeeded()
        } catch {
            throw .storage("\(error)")
        }
        return result
    }

    /// The manifest's GET: the bearer token, and the ETag of the last one applied.
    public func manifestRequest(url: String, token: String?) -> ManifestFetch {
        var headers: [String: String] = [:]
        if let token { headers["authorization"] = "Bearer \(token)" }
        if let etag = try? store.syncValue(Self.manifestETagKey) { headers["if-none-match"] = etag }
        return ManifestFetch(url: url, headers: headers)
    }

    /// For a driver whose fetches are asynchronous: the GETs `syncManifest` will make
    /// after the manifest itself, given its answer (each newer sequence and its `.sig`).
    /// The driver fetches them first and answers `syncManifest`'s calls from what it got.
    public func manifestDownloads(after reply: ManifestFetchReply, token: String?) -> [ManifestFetch] {
        guard reply.status == 200, let newline = reply.body.firstIndex(of: UInt8(ascii: "\n")),
              let json = try? JSONValue.parse(bytes: Array(reply.body[reply.body.index(after: newline)...])),
              let manifest = try? ManifestDocument(json: json) else { return [] }
        let headers = token.map { ["authorization": "Bearer \($0)"] } ?? [:]
        return manifest.sequences.filter { entry in (engine.sequence(named: entry.name)?.version ?? Int.min) < entry.version }
            .flatMap { [ManifestFetch(url: $0.url, headers: headers), ManifestFetch(url: ManifestDocument.signatureURL($0.url), headers: headers)] }
    }

    /// Whether a sequence's `.sig` beside it verifies under the signing key it names.
    func verifySequence(_ entry: ManifestDocument.Entry, _ body: [UInt8], _ manifest: ManifestDocument, headers: [String: String],
                        fetch: (ManifestFetch) throws -> ManifestFetchReply) -> Bool {
        guard let key = manifest.signingKeys[entry.signingKeyID],
              let sig = try? fetch(ManifestFetch(url: ManifestDocument.signatureURL(entry.url), headers: headers)), sig.status == 200,
              let sigBytes = Base64.decode(String(decoding: sig.body, as: UTF8.self).trimmingWhitespace()) else { return false }
        return Ed25519.verify(signature: sigBytes, message: body, publicKey: key)
    }
}

/// `rootPublicKey` as configured: 64 hex digits (the seed's spelling) or base64 of the 32
/// bytes (the real SDK's), or empty for no verification.
enum ManifestRootKey: Equatable {
    case key([UInt8])
    case verificationOff

    static let offWarning = "signature verification is off: rootPublicKey is empty, so any manifest and sequence is accepted"

    init(_ text: String) throws(ManifestSyncError) {
        let trimmed = text.trimmingWhitespace()
        if trimmed.isEmpty {
            self = .verificationOff
        } else if trimmed.utf8.count == 2 * Ed25519.publicKeyCount, let bytes = [UInt8](hex: trimmed) {
            self = .key(bytes)
        } else if let bytes = Base64.decode(trimmed), bytes.count == Ed25519.publicKeyCount {
            self = .key(bytes)
        } else {
            throw .notConfigured
        }
    }

    func accepts(signature: [UInt8], message: [UInt8]) -> Bool {
        switch self {
        case .key(let key): return Ed25519.verify(signature: signature, message: message, publicKey: key)
        case .verificationOff: return true
        }
    }
}

/// A GET the driver performs for a manifest sync.
public struct ManifestFetch: Equatable, Sendable {
    public var url: String
    public var headers: [String: String]

    public init(url: String, headers: [String: String]) {
        self.url = url
        self.headers = headers
    }
}

public struct ManifestFetchReply: Equatable, Sendable {
    public var status: Int
    /// Lowercased names.
    public var headers: [String: String]
    public var body: [UInt8]

    public init(status: Int, headers: [String: String] = [:], body: [UInt8]) {
        self.status = status
        self.headers = Dictionary(headers.map { ($0.key.lowercased(), $0.value) }, uniquingKeysWith: { _, last in last })
        self.body = body
    }
}

/// The SDK's `SyncResult`.
public struct ManifestSyncResult: Equatable, Sendable {
    public var added = 0
    public var updated = 0
    public var removed = 0
    public var skipped = 0
    public var signatureFailures = 0
    /// What the app should log (verification off, …).
    public var warnings: [String] = []

    public init() {}

    public var json: JSONValue {
        ["added": .number(Double(added)), "updated": .number(Double(updated)), "removed": .number(Double(removed)),
         "skipped": .number(Double(skipped)), "signatureFailures": .number(Double(signatureFailures)),
         "warnings": .array(warnings.map(JSONValue.string))]
    }
}

/// The SDK's `SyncError`, plus a storage failure.
public enum ManifestSyncError: Error, Equatable, Sendable, CustomStringConvertible {
    case notConfigured
    case network(String)
    case signatureInvalid(String)
    case invalidManifest(String)
    case storage(String)

    public var description: String {
        switch self {
        case .notConfigured: return "sync not configured: rootPublicKey is neither 64 hex digits nor base64 of a 32-byte Ed25519 key"
        case .network(let m): return "network: \(m)"
        case .signatureInvalid(let m): return "signature invalid: \(m)"
        case .invalidManifest(let m): return "invalid manifest: \(m)"
        case .storage(let m): return "storage: \(m)"
        }
    }
}

/// The manifest's JSON.
struct ManifestDocument {
    struct Entry {
        var name: String
        var version: Int
        var url: String
        var signingKeyID: String
        var sha256: String
        var requiredHandlers: [String]
        var minSDKVersion: String
    }

    struct Removed {
        var name: String
        var removedAt: String
    }

    var signingKeys: [String: [UInt8]]
    var keysJSON: JSONValue
    var sequences: [Entry]
    var removed: [Removed]
    var version: Int64

    init(json: JSONValue) throws(JSONFieldError) {
        let f = try JSONFields(json)
        var keys: [String: [UInt8]] = [:]
        let keyList = try f.array("signing_keys") { v, p throws(JSONFieldError) -> (String, [UInt8]) in
            let k = try JSONFields(v, path: p)
            let id = try k.name("key_id")
            guard let key = Base64.decode(try k.string("public_key")), key.count == Ed25519.publicKeyCount else {
                throw JSONFieldError(path: k.at("public_key"), message: "is not a base64 Ed25519 public key")
            }
            return (id, key)
        }
        for (id, key) in keyList { keys[id] = key }
        signingKeys = keys
        keysJSON = f.optionalValue("signing_keys") ?? []
        sequences = try f.array("sequences") { v, p throws(JSONFieldError) in
            let e = try JSONFields(v, path: p)
            guard let version = try e.optionalInt("version") else { throw JSONFieldError(path: e.at("version"), message: "is required") }
            return Entry(name: try e.name("name"), version: version, url: try e.name("url"), signingKeyID: try e.name("signing_key_id"),
                         sha256: try e.name("sha256"),
                         requiredHandlers: try e.array("required_handlers") { h, hp throws(JSONFieldError) in
                             guard let name = h.stringValue else { throw JSONFieldError(path: hp, message: "must be a string") }
                             return name
                         },
                         minSDKVersion: try e.optionalString("min_sdk_version") ?? "0.0.0")
        }
        removed = try f.array("removed") { v, p throws(JSONFieldError) in
            let r = try JSONFields(v, path: p)
            return Removed(name: try r.name("name"), removedAt: try r.optionalString("removed_at") ?? "")
        }
        guard let version = try f.optionalInt("manifest_version") else {
            throw JSONFieldError(path: "manifest_version", message: "is required")
        }
        self.version = Int64(version)
    }

    /// The SDK's rule: the signature sits beside the sequence, `.json` → `.sig`.
    static func signatureURL(_ url: String) -> String {
        url.hasSuffix(".json") ? String(url.dropLast(5)) + ".sig" : url + ".sig"
    }
}
