public import LabKernel

/// The two ACP dialects a phone may speak, chosen by what its `initialize` carries and
/// kept for the connection:
///
/// - `legacy`: what the OpenAgents desktop app spoke (ACP 0.2.x as its Swift types encoded
///   it): `protocol_version: "0.2.2"`, snake_case fields (`session_id`), a prompt answered
///   at once with `{status: "started"}`, updates shaped as wire-notes §e records.
/// - `current`: ACP as published now: `protocolVersion: 1`, camelCase (`sessionId`), a
///   prompt answered when its turn ends, with `stopReason`.
///
/// Field names are written in camelCase in this code and turned into the dialect's
/// spelling at the edge (`key`), for the ACP methods and for this bridge's own
/// (`tinyvex/history.*`, `terminal/run`) alike.
public enum ACPDialect: String, Sendable, Hashable, CaseIterable {
    case legacy
    case current

    /// The version each dialect states in `initialize`.
    public var protocolVersion: JSONValue {
        switch self {
        case .legacy: return "0.2.2"
        case .current: return 1
        }
    }

    /// Picks the dialect from `initialize`'s params: `protocol_version` as a string means
    /// legacy, `protocolVersion` as an integer current.
    public static func of(initialize params: JSONValue?) throws(RPCError) -> ACPDialect {
        guard case .object(let object)? = params else { throw .invalidParams("initialize takes an object with protocolVersion (or protocol_version)") }
        switch (object["protocolVersion"], object["protocol_version"]) {
        case (let version?, nil):
            guard let number = version.numberValue, number.rounded() == number, (0...65_535).contains(number) else {
                throw .invalidParams("'protocolVersion' is an integer from 0 to 65535", field: "protocolVersion")
            }
            return .current
        case (nil, let version?):
            guard case .string(let text) = version, !text.isEmpty else {
                throw .invalidParams("'protocol_version' is a version string like \"0.2.2\"", field: "protocol_version")
            }
            return .legacy
        case (nil, nil): throw .invalidParams("'protocolVersion' is required (or 'protocol_version' for ACP 0.2)", field: "protocolVersion")
        case (.some, .some): throw .invalidParams("give 'protocolVersion' or 'protocol_version', not both", field: "protocolVersion")
        }
    }

    /// A field name in this dialect: `sessionId` stays, or becomes `session_id`.
    public func key(_ camel: String) -> String {
        switch self {
        case .current: return camel
        case .legacy:
            var out = ""
            for character in camel {
                if character.isUppercase {
                    out += "_" + character.lowercased()
                } else {
                    out.append(character)
                }
            }
            return out
        }
    }

    /// An object with its keys in this dialect (keys starting with `_` stay as they are).
    public func object(_ fields: [String: JSONValue]) -> JSONValue {
        var out: [String: JSONValue] = [:]
        for (name, value) in fields { out[name.hasPrefix("_") ? name : key(name)] = value }
        return .object(out)
    }
}

/// Reads a method's params in a dialect, with `invalid params` errors that name the
/// field as the client spelled it.
public struct ACPParams: Sendable {
    public let dialect: ACPDialect
    let fields: [String: JSONValue]

    public init(_ params: JSONValue?, dialect: ACPDialect) throws(RPCError) {
        self.dialect = dialect
        switch params {
        case nil, .null?: fields = [:]
        case .object(let object)?: fields = object
        case .array?, .bool?, .number?, .string?: throw .invalidParams("params must be an object")
        }
    }

    public func value(_ name: String) -> JSONValue? {
        guard let value = fields[dialect.key(name)], value != .null else { return nil }
        return value
    }

    public func string(_ name: String, max: Int = 4_096) throws(RPCError) -> String {
        guard let value = try optionalString(name, max: max) else { throw .invalidParams("'\(dialect.key(name))' is required", field: dialect.key(name)) }
        return value
    }

    public func optionalString(_ name: String, max: Int = 4_096) throws(RPCError) -> String? {
        guard let value = value(name) else { return nil }
        guard case .string(let text) = value else { throw .invalidParams("'\(dialect.key(name))' must be a string", field: dialect.key(name)) }
        guard !text.isEmpty else { throw .invalidParams("'\(dialect.key(name))' must not be empty", field: dialect.key(name)) }
        guard text.utf8.count <= max else { throw .invalidParams("'\(dialect.key(name))' is at most \(max) bytes", field: dialect.key(name)) }
        return text
    }

    public func optionalInt(_ name: String, in range: ClosedRange<Int>) throws(RPCError) -> Int? {
        guard let value = value(name) else { return nil }
        guard let number = value.numberValue, number.rounded() == number, Double(range.lowerBound) <= number, number <= Double(range.upperBound) else {
            throw .invalidParams("'\(dialect.key(name))' must be an integer from \(range.lowerBound) to \(range.upperBound)", field: dialect.key(name))
        }
        return Int(number)
    }

    /// A session id: required, a string.
    public var sessionID: String {
        get throws(RPCError) { try string("sessionId", max: 128) }
    }
}

/// The text of a prompt: ACP's content blocks (`text`, and the text of `resource` and
/// `resource_link` blocks), or, in the legacy dialect, the plain string the seed's
/// example sends.
public enum PromptText {
    public static let maxBytes = 64 * 1024

    public static func read(_ value: JSONValue?, dialect: ACPDialect) throws(RPCError) -> String {
        let field = "prompt"
        var parts: [String] = []
        switch value {
        case .string(let text)? where dialect == .legacy: parts = [text]
        case .array(let blocks)?:
            for (index, block) in blocks.enumerated() {
                guard case .object(let fields) = block, let type = fields["type"]?.stringValue else {
                    throw .invalidParams("prompt[\(index)] must be a content block with a 'type'", field: field)
                }
                switch type {
                case "text":
                    guard let text = fields["text"]?.stringValue else { throw .invalidParams("prompt[\(index)].text must be a string", field: field) }
                    parts.append(text)
                case "resource":
                    if let text = fields["resource"]?["text"]?.stringValue { parts.append(text) }
                case "resource_link":
                    if let uri = fields["uri"]?.stringValue { parts.append(uri) }
                case "image", "audio":
                    throw .invalidParams("prompt[\(index)]: this agent takes text only (promptCapabilities say so)", field: field)
                default:
                    throw .invalidParams("prompt[\(index)].type '\(type.prefix(32))' is not a content block type", field: field)
                }
            }
        case nil: throw .invalidParams("'prompt' is required: a list of content blocks", field: field)
        default: throw .invalidParams("'prompt' must be a list of content blocks", field: field)
        }
        let text = parts.joined(separator: "\n")
        guard !text.allSatisfy({ $0 == " " || $0 == "\n" || $0 == "\t" }) else { throw .invalidParams("Empty prompt", field: field) }
        guard text.utf8.count <= maxBytes else { throw .invalidParams("a prompt is at most \(maxBytes) bytes", field: field) }
        return text
    }
}
