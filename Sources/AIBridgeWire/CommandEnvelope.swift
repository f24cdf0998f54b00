public import LabKernel

/// The versioned command envelope every bridge call carries (seed 001):
/// `{"command": "ai_chat", "version": 1, "payload": {…}}`. `command` is a required string,
/// `version` a required integer, `payload` a required object whose shape the command's
/// handler validates. Read strictly: anything else is a `BridgeFailure` naming the field.
public struct CommandEnvelope: Sendable, Equatable {
    public var command: String
    public var version: Int
    public var payload: [String: JSONValue]

    public init(command: String, version: Int = 1, payload: [String: JSONValue]) {
        self.command = command
        self.version = version
        self.payload = payload
    }

    /// The protocol versions the bridge speaks.
    public static let supportedVersions = [1]

    public var json: JSONValue { ["command": .string(command), "version": .number(Double(version)), "payload": .object(payload)] }

    public init(parsing value: JSONValue) throws(BridgeFailure) {
        guard case .object(let object) = value else { throw .invalidEnvelope("the envelope must be a JSON object") }
        guard let command = object["command"] else { throw .invalidEnvelope("'command' is required (a string)") }
        guard case .string(let name) = command, !name.isEmpty, name.utf8.count <= 64 else {
            throw .invalidEnvelope("'command' must be a non-empty string of at most 64 characters")
        }
        guard let version = object["version"] else { throw .invalidEnvelope("'version' is required (an integer)") }
        guard case .number(let number) = version, number.rounded() == number, abs(number) < 1e9 else {
            throw .invalidEnvelope("'version' must be an integer")
        }
        guard Self.supportedVersions.contains(Int(number)) else { throw .unsupportedVersion(Int(number)) }
        guard let payload = object["payload"] else { throw .invalidEnvelope("'payload' is required (an object)") }
        guard case .object(let fields) = payload else { throw .invalidEnvelope("'payload' must be an object") }
        if let extra = object.keys.sorted().first(where: { !["command", "version", "payload"].contains($0) }) {
            throw .invalidEnvelope("unknown field '\(extra.prefix(64))'; an envelope has command, version and payload")
        }
        self.init(command: name, version: Int(number), payload: fields)
    }
}

/// A refusal the bridge answers with: its HTTP status and `{"error": code, …}` body.
public enum BridgeFailure: Error, Sendable, Equatable {
    case invalidEnvelope(String)
    case unsupportedVersion(Int)
    case unknownCommand(String, supported: [String])
    case invalidPayload(field: String, message: String)
    case unauthorized(String)
    case invalidPIN
    case tooManyAttempts(retryAfterSeconds: Int)
    case bridgeOffline
    case bridgeTimeout
    case payloadTooLarge(limit: Int)
    case sealFailed(String)
    case notFound
    case methodNotAllowed

    public var status: Int {
        switch self {
        case .invalidEnvelope, .unsupportedVersion, .unknownCommand, .invalidPayload, .sealFailed: return 400
        case .unauthorized, .invalidPIN: return 401
        case .tooManyAttempts: return 429
        case .bridgeOffline: return 503
        case .bridgeTimeout: return 504
        case .payloadTooLarge: return 413
        case .notFound: return 404
        case .methodNotAllowed: return 405
        }
    }

    public var code: String {
        switch self {
        case .invalidEnvelope: return "invalid_envelope"
        case .unsupportedVersion: return "unsupported_version"
        case .unknownCommand: return "unknown_command"
        case .invalidPayload: return "invalid_payload"
        case .unauthorized: return "unauthorized"
        case .invalidPIN: return "invalid_pin"
        case .tooManyAttempts: return "too_many_attempts"
        case .bridgeOffline: return "bridge_offline"
        case .bridgeTimeout: return "bridge_timeout"
        case .payloadTooLarge: return "payload_too_large"
        case .sealFailed: return "sealed_payload_invalid"
        case .notFound: return "not_found"
        case .methodNotAllowed: return "method_not_allowed"
        }
    }

    /// The body: `{"error": code, …}` with what the code needs (the seed's unknown_command
    /// carries the command and the supported list).
    public var body: JSONValue {
        var object: [String: JSONValue] = ["error": .string(code)]
        switch self {
        case .invalidEnvelope(let message), .unauthorized(let message), .sealFailed(let message): object["message"] = .string(message)
        case .unsupportedVersion(let version):
            object["version"] = .number(Double(version))
            object["supported_versions"] = .array(CommandEnvelope.supportedVersions.map { .number(Double($0)) })
        case .unknownCommand(let command, let supported):
            object["command"] = .string(command)
            object["supported"] = .array(supported.map { .string($0) })
        case .invalidPayload(let field, let message):
            object["field"] = .string(field)
            object["message"] = .string(message)
        case .invalidPIN: object["message"] = "the PIN is wrong, used or expired"
        case .tooManyAttempts(let seconds): object["retry_after"] = .number(Double(seconds))
        case .bridgeOffline: object["message"] = "the desktop daemon is not connected"
        case .bridgeTimeout: object["message"] = "the desktop daemon did not answer in time"
        case .payloadTooLarge(let limit): object["limit"] = .number(Double(limit))
        case .notFound, .methodNotAllowed: break
        }
        return .object(object)
    }

    public var response: HTTPResponseMessage {
        var headers: [HTTPHeader] = []
        if case .tooManyAttempts(let seconds) = self { headers.append(HTTPHeader("Retry-After", String(seconds))) }
        if case .unauthorized = self { headers.append(HTTPHeader("WWW-Authenticate", "Bearer")) }
        return .json(status, body, headers: headers)
    }

    /// Reads an error body back (the client's side); nil when it is not one.
    public init?(status: Int, body: JSONValue?) {
        guard let code = body?["error"]?.stringValue else { return nil }
        let message = body?["message"]?.stringValue ?? ""
        switch code {
        case "invalid_envelope": self = .invalidEnvelope(message)
        case "unsupported_version": self = .unsupportedVersion(Int(body?["version"]?.numberValue ?? 0))
        case "unknown_command":
            self = .unknownCommand(body?["command"]?.stringValue ?? "", supported: body?["supported"]?.arrayValue?.compactMap(\.stringValue) ?? [])
        case "invalid_payload": self = .invalidPayload(field: body?["field"]?.stringValue ?? "", message: message)
        case "unauthorized": self = .unauthorized(message)
        case "invalid_pin": self = .invalidPIN
        case "too_many_attempts": self = .tooManyAttempts(retryAfterSeconds: Int(body?["retry_after"]?.numberValue ?? 60))
        case "bridge_offline": self = .bridgeOffline
        case "bridge_timeout": self = .bridgeTimeout
        case "payload_too_large": self = .payloadTooLarge(limit: Int(body?["limit"]?.numberValue ?? 0))
        case "sealed_payload_invalid": self = .sealFailed(message)
        case "not_found": self = .notFound
        case "method_not_allowed": self = .methodNotAllowed
        default: return nil
        }
    }
}
