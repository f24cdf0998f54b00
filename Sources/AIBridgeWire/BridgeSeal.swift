public import LabCrypto
public import LabKernel

/// Payloads the relay cannot read (beyond the seed): an X25519 box with a per-request key.
///
/// The phone draws an ephemeral X25519 key pair for each request and derives
/// `key = HKDF-SHA256(salt: "fleetlab ai-bridge v1", ikm: X25519(ephemeral, daemon),
/// info: ephemeral public ‖ daemon public, 32 bytes)`. The request body is
///
///     {"sealed": {"v": 1, "epk": B64(ephemeral public), "nonce": B64(24 bytes),
///                 "box": B64(XChaCha20-Poly1305(key, nonce, ad: "request", envelope JSON))}}
///
/// and every frame of the daemon's answer is `{"sealed": {"nonce": B64(24), "box":
/// B64(XChaCha20-Poly1305(key, nonce, ad: "reply", data JSON))}}` under the same key, with
/// a fresh nonce each. Only the phone (which keeps the ephemeral secret for the request)
/// and the daemon (whose key pair the pairing handed out) can derive the key; the relay
/// forwards bytes. B64 is standard base64 with padding. Keys and nonces come from the
/// caller: the CSPRNG live, the seeded streams in simulation.
public enum BridgeSeal {
    static let salt = Array("fleetlab ai-bridge v1".utf8)
    static let requestAD = Array("request".utf8)
    static let replyAD = Array("reply".utf8)

    /// The request key both ends derive.
    public static func key(shared: [UInt8], ephemeral: [UInt8], daemon: [UInt8]) -> [UInt8] {
        HKDF.derive(salt: salt, ikm: shared, info: ephemeral + daemon, count: 32)
    }

    /// Seals an envelope to the daemon's public key: the body to send and the key that
    /// opens the answer.
    public static func seal(_ envelope: JSONValue, to daemon: [UInt8], ephemeralSeed: [UInt8], nonce: [UInt8]) throws(BridgeFailure) -> (body: JSONValue, key: [UInt8]) {
        guard daemon.count == 32, ephemeralSeed.count == 32, nonce.count == 24 else { throw .sealFailed("keys are 32 bytes and nonces 24") }
        let ephemeral: X25519.KeyPair
        let shared: [UInt8]
        do {
            ephemeral = try X25519.KeyPair(seed: ephemeralSeed)
            shared = try ephemeral.sharedSecret(with: daemon)
        } catch { throw .sealFailed("the daemon's key is not a usable X25519 public key") }
        let key = key(shared: shared, ephemeral: ephemeral.publicKey, daemon: daemon)
        let box = aead(seal: Array(envelope.canonicalText.utf8), key: key, nonce: nonce, ad: requestAD)
        return (["sealed": ["v": 1, "epk": .string(Base64.encode(ephemeral.publicKey)), "nonce": .string(Base64.encode(nonce)),
                            "box": .string(Base64.encode(box))]], key)
    }

    /// Opens a sealed request with the daemon's key pair: the envelope's JSON and the key
    /// the answer is sealed under.
    public static func open(_ sealed: JSONValue, with daemon: X25519.KeyPair) throws(BridgeFailure) -> (envelope: JSONValue, key: [UInt8]) {
        guard case .object(let fields) = sealed, fields["v"] == 1 else { throw .sealFailed("'sealed' must be an object with v: 1") }
        guard let epk = fields["epk"]?.stringValue.flatMap(Base64.decode), epk.count == 32 else { throw .sealFailed("'epk' must be 32 bytes of base64") }
        guard let nonce = fields["nonce"]?.stringValue.flatMap(Base64.decode), nonce.count == 24 else {
            throw .sealFailed("'nonce' must be 24 bytes of base64")
        }
        guard let box = fields["box"]?.stringValue.flatMap(Base64.decode), box.count >= XChaCha20Poly1305.tagCount else {
            throw .sealFailed("'box' must be base64 of at least 16 bytes")
        }
        let shared: [UInt8]
        do { shared = try daemon.sharedSecret(with: epk) } catch { throw .sealFailed("'epk' is not a usable X25519 public key") }
        let key = key(shared: shared, ephemeral: epk, daemon: daemon.publicKey)
        guard let plain = aead(open: box, key: key, nonce: nonce, ad: requestAD) else {
            throw .sealFailed("the box does not open with this daemon's key (sealed to an old key? re-pair)")
        }
        guard let envelope = try? JSONValue.parse(bytes: plain) else { throw .sealFailed("the sealed envelope is not JSON") }
        return (envelope, key)
    }

    /// One frame of the answer, sealed.
    public static func sealReply(_ data: JSONValue, key: [UInt8], nonce: [UInt8]) -> JSONValue {
        ["sealed": ["nonce": .string(Base64.encode(nonce)), "box": .string(Base64.encode(aead(seal: Array(data.canonicalText.utf8), key: key, nonce: nonce, ad: replyAD)))]]
    }

    /// Opens a frame of the answer; nil when it does not authenticate.
    public static func openReply(_ frame: JSONValue, key: [UInt8]) -> JSONValue? {
        guard let sealed = frame["sealed"], let nonce = sealed["nonce"]?.stringValue.flatMap(Base64.decode), nonce.count == 24,
              let box = sealed["box"]?.stringValue.flatMap(Base64.decode), box.count >= XChaCha20Poly1305.tagCount,
              let plain = aead(open: box, key: key, nonce: nonce, ad: replyAD) else { return nil }
        return try? JSONValue.parse(bytes: plain)
    }

    static func aead(seal plain: [UInt8], key: [UInt8], nonce: [UInt8], ad: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: plain.count + XChaCha20Poly1305.tagCount)
        let keyAndNonce = key + nonce
        plain.withUnsafeBytes { p in keyAndNonce.withUnsafeBytes { k in ad.withUnsafeBytes { a in
            out.withUnsafeMutableBytes { XChaCha20Poly1305.seal(p, keyAndNonce: k, ad: a, into: $0) }
        } } }
        return out
    }

    static func aead(open box: [UInt8], key: [UInt8], nonce: [UInt8], ad: [UInt8]) -> [UInt8]? {
        var out = [UInt8](repeating: 0, count: box.count - XChaCha20Poly1305.tagCount)
        let keyAndNonce = key + nonce
        let ok = box.withUnsafeBytes { b in keyAndNonce.withUnsafeBytes { k in ad.withUnsafeBytes { a in
            out.withUnsafeMutableBytes { XChaCha20Poly1305.open(b, keyAndNonce: k, ad: a, into: $0) }
        } } }
        return ok ? out : nil
    }
}
