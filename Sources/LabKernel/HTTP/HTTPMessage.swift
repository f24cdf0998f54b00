/// An HTTP request as a server core sees it: decoded by a driver (Hummingbird live, the
/// simulator's virtual network) and handed in with `now`.
public struct HTTPRequestMessage: Sendable, Equatable {
    /// Uppercase: `GET`, `POST`, …
    public var method: String
    /// The path without the query, percent-decoded per segment by `segments`.
    public var path: String
    public var query: [String: String]
    /// Header names lowercased.
    public var headers: [String: String]
    public var body: [UInt8]
    /// The address the request came from, as the driver saw the connection (never a
    /// header, which any client can forge): what per-client limits are keyed by. Nil when
    /// the driver has none (a core driven by hand).
    public var peer: String?

    public init(method: String, path: String, query: [String: String] = [:], headers: [String: String] = [:], body: [UInt8] = [],
                peer: String? = nil) {
        self.method = method.uppercased()
        self.path = path
        self.query = query
        self.headers = Dictionary(headers.map { ($0.key.lowercased(), $0.value) }, uniquingKeysWith: { _, last in last })
        self.body = body
        self.peer = peer
    }

    /// From a request target (`/mobile/status?device_id=a%20b`).
    public init(method: String, target: String, headers: [String: String] = [:], body: [UInt8] = [], peer: String? = nil) {
        let parts = target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        var query: [String: String] = [:]
        if parts.count == 2 {
            for pair in parts[1].split(separator: "&") {
                let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                let key = PercentEncoding.decode(String(kv[0]), plusIsSpace: true) ?? String(kv[0])
                let value = kv.count == 2 ? (PercentEncoding.decode(String(kv[1]), plusIsSpace: true) ?? String(kv[1])) : ""
                query[key] = value
            }
        }
        self.init(method: method, path: String(parts[0]), query: query, headers: headers, body: body, peer: peer)
    }

    public func header(_ name: String) -> String? { headers[name.lowercased()] }

    /// The path's segments, percent-decoded (nil for a segment that is not valid UTF-8).
    public var segments: [String] {
        path.split(separator: "/").map { PercentEncoding.decode(String($0), plusIsSpace: false) ?? String($0) }
    }
}

/// An HTTP response from a server core.
public struct HTTPResponseMessage: Sendable, Equatable {
    public var status: Int
    /// In order; names as written.
    public var headers: [HTTPHeader]
    public var body: [UInt8]

    public init(status: Int, headers: [HTTPHeader] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    public static func json(_ status: Int, _ value: JSONValue, headers: [HTTPHeader] = []) -> HTTPResponseMessage {
        var bytes: [UInt8] = []
        value.write(to: &bytes)
        return HTTPResponseMessage(status: status, headers: [HTTPHeader("Content-Type", "application/json")] + headers, body: bytes)
    }

    /// `{"error": "<kind>: <message>"}`, orch8's error body.
    public static func error(_ status: Int, _ kind: String, _ message: String) -> HTTPResponseMessage {
        json(status, ["error": .string("\(kind): \(message)")])
    }

    public static func empty(_ status: Int, headers: [HTTPHeader] = []) -> HTTPResponseMessage {
        HTTPResponseMessage(status: status, headers: headers)
    }

    /// The first header named `name`, in any case. Compared byte by byte (names are ASCII),
    /// not by lowercasing both, which made two strings for every header of every answer.
    public func header(_ name: String) -> String? {
        headers.first { HTTPHeader.sameName($0.name, name) }?.value
    }

    /// The body parsed as JSON, nil when it is not.
    public var jsonBody: JSONValue? { try? JSONValue.parse(bytes: body) }
}

public struct HTTPHeader: Sendable, Equatable {
    public var name: String
    public var value: String
    public init(_ name: String, _ value: String) {
        self.name = name
        self.value = value
    }

    /// Whether two header names are the same name: equal but for the case of ASCII letters.
    public static func sameName(_ a: String, _ b: String) -> Bool {
        a.utf8.count == b.utf8.count && zip(a.utf8, b.utf8).allSatisfy { x, y in
            x == y || (x ^ y == 0x20 && (0x61...0x7A).contains(x | 0x20))
        }
    }
}

/// RFC 3986 percent-encoding.
public enum PercentEncoding {
    /// Decodes `%XX` escapes (and `+` as space in query strings); nil when an escape is
    /// malformed or the result is not UTF-8.
    public static func decode(_ text: String, plusIsSpace: Bool) -> String? {
        var out: [UInt8] = []
        let bytes = Array(text.utf8)
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "%") {
                guard index + 2 < bytes.count, let value = [UInt8](hex: String(decoding: bytes[index + 1...index + 2], as: UTF8.self)) else {
                    return nil
                }
                out.append(value[0])
                index += 3
            } else {
                out.append(plusIsSpace && byte == UInt8(ascii: "+") ? UInt8(ascii: " ") : byte)
                index += 1
            }
        }
        return String(validating: out, as: UTF8.self)
    }

    /// Encodes everything but unreserved characters.
    public static func encode(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                out += "%" + [byte].hexString.uppercased()
            }
        }
        return out
    }
}
