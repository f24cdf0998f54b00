public import LabKernel

/// The tunnel between the relay and a daemon: a WebSocket the daemon dials to the relay's
/// `/v1/tunnel`, one JSON object per text frame, `type` naming it. The daemon proves its
/// identity by signing the relay's challenge with its Ed25519 key (trust on first use:
/// the relay remembers the key a daemon id first came with and refuses any other).
///
///     relay → daemon   challenge {nonce}
///     daemon → relay   hello {daemon_id, identity_key, server_public_key, signature}
///     relay → daemon   welcome {daemon_id, revoked}          or a close (4401)
///     daemon → relay   pairing.open {session_id, pin, expires_at} · pairing.close {session_id}
///     relay → daemon   pairing.closed {session_id, reason}
///     relay → daemon   pair.issue {request_id, session_id, device_id}
///     daemon → relay   pair.issued {request_id, token, server_public_key} · pair.refused {request_id, reason}
///     relay → daemon   request {request_id, body} · cancel {request_id}
///     daemon → relay   response {request_id, status, body}
///                      stream.start {request_id} · stream.chunk {request_id, data}
///                      stream.end {request_id, data} · stream.error {request_id, error, message}
///
/// `signature` signs `"fleetlab ai-bridge tunnel" ‖ nonce ‖ server_public_key` (bytes),
/// so a relay (or anyone in between) cannot swap the pairing key. Keys and signatures are
/// base64. A request's `body` is the phone's JSON body as it came (an envelope, or a
/// sealed one the relay cannot read).
public enum TunnelMessage: Sendable, Equatable {
    case challenge(nonce: [UInt8])
    case hello(daemonID: String, identityKey: [UInt8], serverPublicKey: [UInt8], signature: [UInt8])
    case welcome(daemonID: String, revoked: Int)
    case pairingOpen(sessionID: String, pin: String, expiresAt: Int64)
    case pairingClose(sessionID: String)
    case pairingClosed(sessionID: String, reason: String)
    case pairIssue(requestID: Int, sessionID: String, deviceID: String)
    case pairIssued(requestID: Int, token: String, serverPublicKey: [UInt8])
    case pairRefused(requestID: Int, reason: String)
    case request(requestID: Int, body: JSONValue)
    case cancel(requestID: Int)
    case response(requestID: Int, status: Int, body: JSONValue)
    case streamStart(requestID: Int)
    case streamChunk(requestID: Int, data: JSONValue)
    case streamEnd(requestID: Int, data: JSONValue)
    case streamError(requestID: Int, error: String, message: String)

    /// What a daemon signs to prove its key in `hello`.
    public static func signedHello(nonce: [UInt8], serverPublicKey: [UInt8]) -> [UInt8] {
        Array("fleetlab ai-bridge tunnel".utf8) + nonce + serverPublicKey
    }

    public var text: String { json.canonicalText }

    public var json: JSONValue {
        func b64(_ bytes: [UInt8]) -> JSONValue { .string(Base64.encode(bytes)) }
        func n(_ value: Int) -> JSONValue { .number(Double(value)) }
        switch self {
        case .challenge(let nonce): return ["type": "challenge", "nonce": b64(nonce)]
        case .hello(let id, let identity, let server, let signature):
            return ["type": "hello", "daemon_id": .string(id), "identity_key": b64(identity), "server_public_key": b64(server), "signature": b64(signature)]
        case .welcome(let id, let revoked): return ["type": "welcome", "daemon_id": .string(id), "revoked": n(revoked)]
        case .pairingOpen(let session, let pin, let expires):
            return ["type": "pairing.open", "session_id": .string(session), "pin": .string(pin), "expires_at": .number(Double(expires))]
        case .pairingClose(let session): return ["type": "pairing.close", "session_id": .string(session)]
        case .pairingClosed(let session, let reason): return ["type": "pairing.closed", "session_id": .string(session), "reason": .string(reason)]
        case .pairIssue(let id, let session, let device):
            return ["type": "pair.issue", "request_id": n(id), "session_id": .string(session), "device_id": .string(device)]
        case .pairIssued(let id, let token, let key): return ["type": "pair.issued", "request_id": n(id), "token": .string(token), "server_public_key": b64(key)]
        case .pairRefused(let id, let reason): return ["type": "pair.refused", "request_id": n(id), "reason": .string(reason)]
        case .request(let id, let body): return ["type": "request", "request_id": n(id), "body": body]
        case .cancel(let id): return ["type": "cancel", "request_id": n(id)]
        case .response(let id, let status, let body): return ["type": "response", "request_id": n(id), "status": n(status), "body": body]
        case .streamStart(let id): return ["type": "stream.start", "request_id": n(id)]
        case .streamChunk(let id, let data): return ["type": "stream.chunk", "request_id": n(id), "data": data]
        case .streamEnd(let id, let data): return ["type": "stream.end", "request_id": n(id), "data": data]
        case .streamError(let id, let error, let message):
            return ["type": "stream.error", "request_id": n(id), "error": .string(error), "message": .string(message)]
        }
    }

    /// Reads a frame; nil for anything that is not a well-formed tunnel message.
    public init?(text: String) {
        guard text.utf8.count <= 4 << 20, let value = try? JSONValue.parse(text), let type = value["type"]?.stringValue else { return nil }
        func bytes(_ key: String, _ count: Int? = nil) -> [UInt8]? {
            guard let decoded = value[key]?.stringValue.flatMap(Base64.decode) else { return nil }
            return count == nil || decoded.count == count ? decoded : nil
        }
        func string(_ key: String) -> String? { value[key]?.stringValue }
        func int(_ key: String) -> Int? {
            guard let number = value[key]?.numberValue, number.rounded() == number, abs(number) < 1e15 else { return nil }
            return Int(number)
        }
        switch type {
        case "challenge":
            guard let nonce = bytes("nonce", 32) else { return nil }
            self = .challenge(nonce: nonce)
        case "hello":
            guard let id = string("daemon_id"), !id.isEmpty, id.utf8.count <= 128, let identity = bytes("identity_key", 32),
                  let server = bytes("server_public_key", 32), let signature = bytes("signature", 64) else { return nil }
            self = .hello(daemonID: id, identityKey: identity, serverPublicKey: server, signature: signature)
        case "welcome":
            guard let id = string("daemon_id") else { return nil }
            self = .welcome(daemonID: id, revoked: int("revoked") ?? 0)
        case "pairing.open":
            guard let session = string("session_id"), let pin = string("pin"), let expires = int("expires_at") else { return nil }
            self = .pairingOpen(sessionID: session, pin: pin, expiresAt: Int64(expires))
        case "pairing.close":
            guard let session = string("session_id") else { return nil }
            self = .pairingClose(sessionID: session)
        case "pairing.closed":
            guard let session = string("session_id") else { return nil }
            self = .pairingClosed(sessionID: session, reason: string("reason") ?? "")
        case "pair.issue":
            guard let id = int("request_id"), let session = string("session_id"), let device = string("device_id") else { return nil }
            self = .pairIssue(requestID: id, sessionID: session, deviceID: device)
        case "pair.issued":
            guard let id = int("request_id"), let token = string("token"), !token.isEmpty, let key = bytes("server_public_key", 32) else { return nil }
            self = .pairIssued(requestID: id, token: token, serverPublicKey: key)
        case "pair.refused":
            guard let id = int("request_id") else { return nil }
            self = .pairRefused(requestID: id, reason: string("reason") ?? "")
        case "request":
            guard let id = int("request_id"), let body = value["body"] else { return nil }
            self = .request(requestID: id, body: body)
        case "cancel":
            guard let id = int("request_id") else { return nil }
            self = .cancel(requestID: id)
        case "response":
            guard let id = int("request_id"), let status = int("status"), (100...599).contains(status), let body = value["body"] else { return nil }
            self = .response(requestID: id, status: status, body: body)
        case "stream.start":
            guard let id = int("request_id") else { return nil }
            self = .streamStart(requestID: id)
        case "stream.chunk":
            guard let id = int("request_id"), let data = value["data"] else { return nil }
            self = .streamChunk(requestID: id, data: data)
        case "stream.end":
            guard let id = int("request_id") else { return nil }
            self = .streamEnd(requestID: id, data: value["data"] ?? [:])
        case "stream.error":
            guard let id = int("request_id") else { return nil }
            self = .streamError(requestID: id, error: string("error") ?? "stream_failed", message: string("message") ?? "")
        default:
            return nil
        }
    }
}
