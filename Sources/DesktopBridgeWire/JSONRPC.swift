public import LabKernel

/// A JSON-RPC 2.0 id: a string or a number, echoed exactly as it came; `null` only where
/// the spec puts it (a request that said `"id": null`, an error for an undetectable id).
public enum RPCID: Hashable, Sendable, CustomStringConvertible {
    case number(Double)
    case string(String)
    case null

    public var json: JSONValue {
        switch self {
        case .number(let n): return .number(n)
        case .string(let s): return .string(s)
        case .null: return .null
        }
    }

    /// Reads an id member; nil for anything JSON-RPC does not allow as one.
    public init?(json: JSONValue) {
        switch json {
        case .number(let n): self = .number(n)
        case .string(let s): self = .string(s)
        case .null: self = .null
        case .bool, .array, .object: return nil
        }
    }

    public var description: String { json.canonicalText }
}

/// A JSON-RPC error object `{code, message, data?}`. The codes JSON-RPC reserves, and
/// the ones this bridge adds in the implementation-defined range (docs/desktop-bridge.md).
public struct RPCError: Error, Hashable, Sendable, CustomStringConvertible {
    public var code: Int
    public var message: String
    public var data: JSONValue?

    public init(code: Int, message: String, data: JSONValue? = nil) {
        self.code = code
        self.message = message
        self.data = data
    }

    public static let parseErrorCode = -32700
    public static let invalidRequestCode = -32600
    public static let methodNotFoundCode = -32601
    public static let invalidParamsCode = -32602
    public static let internalErrorCode = -32603
    /// A method other than `initialize` before the handshake.
    public static let notInitializedCode = -32001
    /// ACP's: a session, a file or a title that is not there.
    public static let resourceNotFoundCode = -32002
    /// A prompt to a session whose turn is still running.
    public static let sessionBusyCode = -32003

    public static func parseError(_ detail: String) -> RPCError { RPCError(code: parseErrorCode, message: "Parse error: \(detail)") }
    public static func invalidRequest(_ detail: String) -> RPCError { RPCError(code: invalidRequestCode, message: "Invalid Request: \(detail)") }
    public static func methodNotFound(_ method: String) -> RPCError {
        RPCError(code: methodNotFoundCode, message: "Method not found: \(method.prefix(128))", data: ["method": .string(String(method.prefix(128)))])
    }
    public static func invalidParams(_ detail: String, field: String? = nil) -> RPCError {
        RPCError(code: invalidParamsCode, message: "Invalid params: \(detail)", data: field.map { ["field": .string($0)] })
    }
    public static func internalError(_ detail: String) -> RPCError { RPCError(code: internalErrorCode, message: "Internal error: \(detail)") }
    public static let notInitialized = RPCError(code: notInitializedCode, message: "Not initialized: send initialize first")
    public static func notFound(_ detail: String) -> RPCError { RPCError(code: resourceNotFoundCode, message: "Resource not found: \(detail)") }

    public var json: JSONValue {
        var object: [String: JSONValue] = ["code": .number(Double(code)), "message": .string(message)]
        if let data { object["data"] = data }
        return .object(object)
    }

    public var description: String { "\(code) \(message)" }
}

/// One JSON-RPC message, read strictly.
public enum RPCMessage: Hashable, Sendable {
    /// A call that wants an answer (it had an `id` member, `null` included).
    case request(id: RPCID, method: String, params: JSONValue?)
    /// A call without an `id` member: never answered, not even with an error.
    case notification(method: String, params: JSONValue?)
    case response(id: RPCID, result: JSONValue)
    case failure(id: RPCID, error: RPCError)

    public var json: JSONValue {
        var object: [String: JSONValue] = ["jsonrpc": "2.0"]
        switch self {
        case .request(let id, let method, let params):
            object["id"] = id.json
            object["method"] = .string(method)
            if let params { object["params"] = params }
        case .notification(let method, let params):
            object["method"] = .string(method)
            if let params { object["params"] = params }
        case .response(let id, let result):
            object["id"] = id.json
            object["result"] = result
        case .failure(let id, let error):
            object["id"] = id.json
            object["error"] = error.json
        }
        return .object(object)
    }

    public var text: String { json.canonicalText }
}

/// What one text frame held: a message, a batch of them, or something that is neither.
public enum RPCFrame: Hashable, Sendable {
    /// Valid JSON, one element (which may still be an invalid request).
    case single(RPCItem)
    /// A non-empty array, each element read on its own.
    case batch([RPCItem])
    /// Not JSON, too large, or an empty batch: answered with one error whose id is null.
    case refused(RPCError)

    /// The largest frame read; a bigger one is refused without parsing.
    public static let maxBytes = 1 << 20
    /// The most elements a batch may hold.
    public static let maxBatch = 100

    public init(text: String) {
        guard text.utf8.count <= Self.maxBytes else {
            self = .refused(.invalidRequest("a frame is at most \(Self.maxBytes) bytes"))
            return
        }
        let value: JSONValue
        do { value = try JSONValue.parse(text) } catch { self = .refused(.parseError(error.description)); return }
        if case .array(let items) = value {
            guard !items.isEmpty else { self = .refused(.invalidRequest("an empty batch")); return }
            guard items.count <= Self.maxBatch else { self = .refused(.invalidRequest("a batch holds at most \(Self.maxBatch) messages")); return }
            self = .batch(items.map(RPCItem.init(json:)))
        } else {
            self = .single(RPCItem(json: value))
        }
    }
}

/// One element of a frame: a well-formed message, or a refusal to answer with its id.
public enum RPCItem: Hashable, Sendable {
    case message(RPCMessage)
    case invalid(id: RPCID, error: RPCError)

    public init(json value: JSONValue) {
        guard case .object(let object) = value else {
            self = .invalid(id: .null, error: .invalidRequest("a message is a JSON object, found \(value.kindName)"))
            return
        }
        // The id is read first so an invalid request is answered with it where it can be.
        var id: RPCID?
        if let member = object["id"] {
            guard let parsed = RPCID(json: member) else {
                self = .invalid(id: .null, error: .invalidRequest("'id' must be a string, a number or null"))
                return
            }
            id = parsed
        }
        guard object["jsonrpc"] == "2.0" else {
            self = .invalid(id: id ?? .null, error: .invalidRequest("'jsonrpc' must be \"2.0\""))
            return
        }
        if let method = object["method"] {
            guard case .string(let name) = method, !name.isEmpty else {
                self = .invalid(id: id ?? .null, error: .invalidRequest("'method' must be a non-empty string"))
                return
            }
            let params = object["params"]
            if let params {
                switch params {
                case .object, .array: break
                case .null, .bool, .number, .string:
                    self = .invalid(id: id ?? .null, error: .invalidRequest("'params' must be an object or an array"))
                    return
                }
            }
            self = .message(id.map { .request(id: $0, method: name, params: params) } ?? .notification(method: name, params: params))
            return
        }
        // No method: a response (to a call the other side made).
        guard let id else {
            self = .invalid(id: .null, error: .invalidRequest("a request needs 'method'; a response needs 'id'"))
            return
        }
        switch (object["result"], object["error"]) {
        case (let result?, nil): self = .message(.response(id: id, result: result))
        case (nil, let error?):
            guard let code = error["code"]?.numberValue, code.rounded() == code, abs(code) < 1e9, let message = error["message"]?.stringValue else {
                self = .invalid(id: id, error: .invalidRequest("'error' must be {code: integer, message: string}"))
                return
            }
            self = .message(.failure(id: id, error: RPCError(code: Int(code), message: message, data: error["data"])))
        case (nil, nil), (.some, .some):
            self = .invalid(id: id, error: .invalidRequest("a request needs 'method'; a response has exactly one of 'result' and 'error'"))
        }
    }
}
