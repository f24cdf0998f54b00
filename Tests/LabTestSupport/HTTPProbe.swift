public import Foundation
#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif

/// A tiny HTTP client for loopback tests.
public enum HTTPProbe {
    public struct Reply: Sendable {
        public var status: Int
        public var headers: [String: String]
        public var body: Data
        public var text: String { String(decoding: body, as: UTF8.self) }
        public var json: Any? { try? JSONSerialization.jsonObject(with: body) }
    }

    public static func request(_ method: String, _ url: String, body: Data? = nil, headers: [String: String] = [:]) async throws -> Reply {
        var request = URLRequest(url: URL(string: url)!)
        request.httpMethod = method
        request.httpBody = body
        request.timeoutInterval = 10
        for (key, value) in headers { request.setValue(value, forHTTPHeaderField: key) }
        let (data, response) = try await URLSession.shared.data(for: request)
        let http = response as! HTTPURLResponse
        var fields: [String: String] = [:]
        for (key, value) in http.allHeaderFields { fields[String(describing: key).lowercased()] = String(describing: value) }
        return Reply(status: http.statusCode, headers: fields, body: data)
    }

    public static func get(_ url: String) async throws -> Reply { try await request("GET", url) }
}

extension HTTPProbe {
    /// One HTTP/1.1 exchange on a plain socket whose source address is `source` (any
    /// 127.x.y.z works on Linux loopback): how a test is two different clients to a
    /// server's per-address limits. `Connection: close`; every wait has a 10 s deadline.
    ///
    /// The exchange blocks a thread, so it runs on one of its own (`offPool`): blocking a
    /// thread of the cooperative pool would starve the in-process server it is talking to.
    public static func request(from source: String, _ method: String, _ url: String, body: Data? = nil,
                               headers: [String: String] = [:]) async throws -> Reply {
        try await offPool { try exchange(from: source, method, url, body: body, headers: headers) }
    }

    private static func exchange(from source: String, _ method: String, _ url: String, body: Data?,
                                 headers: [String: String]) throws -> Reply {
        guard let parsed = URL(string: url), let host = parsed.host, let port = parsed.port else { throw POSIXError(.EINVAL) }
        var head = "\(method) \(parsed.path.isEmpty ? "/" : parsed.path)\(parsed.query.map { "?" + $0 } ?? "") HTTP/1.1\r\nHost: \(host):\(port)\r\nConnection: close\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        head += "Content-Length: \(body?.count ?? 0)\r\n\r\n"
        let outcome = try send(Array(head.utf8) + Array(body ?? Data()), to: url, from: source, wait: 10)
        guard outcome.closedAfter != nil else { throw POSIXError(.ETIMEDOUT) }
        guard let reply = outcome.reply else { throw POSIXError(.EBADMSG) }
        return reply
    }

    /// What a server did with bytes sent on a fresh connection: its reply, if one came, and
    /// how long after the bytes it closed the connection (nil: still open after `wait`).
    public struct RawOutcome: Sendable {
        public var reply: Reply?
        public var closedAfter: Double?
    }

    /// Sends `bytes` as they are (none at all, half a request, something that is not HTTP)
    /// on a new connection to `url`'s host and port, then reads until the server closes
    /// the connection or `wait` seconds pass.
    public static func raw(_ bytes: [UInt8], to url: String, wait: Double) async throws -> RawOutcome {
        try await offPool { try send(bytes, to: url, from: "127.0.0.1", wait: wait) }
    }

    private static func send(_ bytes: [UInt8], to url: String, from source: String, wait: Double) throws -> RawOutcome {
        guard let parsed = URL(string: url), let host = parsed.host, let port = parsed.port else { throw POSIXError(.EINVAL) }
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.EMFILE) }
        defer { close(fd) }
        var timeout = timeval(tv_sec: Int(wait), tv_usec: Int((wait - wait.rounded(.down)) * 1e6))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        func address(_ ip: String, _ port: Int) -> sockaddr_in {
            var a = sockaddr_in()
            a.sin_family = sa_family_t(AF_INET)
            a.sin_addr.s_addr = inet_addr(ip)
            a.sin_port = in_port_t(UInt16(port).bigEndian)
            return a
        }
        var local = address(source, 0), remote = address(host, port)
        let bound = withUnsafePointer(to: &local) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard bound == 0 else { throw POSIXError(.EADDRNOTAVAIL) }
        let connected = withUnsafePointer(to: &remote) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard connected == 0 else { throw POSIXError(.ECONNREFUSED) }
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            guard written > 0 else { throw POSIXError(.EPIPE) }
            offset += written
        }
        let sent = Date()
        var received: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16_384)
        var closedAfter: Double?
        while Date().timeIntervalSince(sent) < wait {
            let count = read(fd, &chunk, chunk.count)
            if count < 0 { break }
            if count == 0 { closedAfter = Date().timeIntervalSince(sent); break }
            received += chunk[..<count]
        }
        guard let split = received.indices.first(where: { received[$0...].starts(with: [13, 10, 13, 10]) }) else {
            return RawOutcome(reply: nil, closedAfter: closedAfter)
        }
        let lines = String(decoding: received[..<split], as: UTF8.self).components(separatedBy: "\r\n")
        let status = Int(lines.first?.split(separator: " ").dropFirst().first ?? "") ?? 0
        var fields: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            fields[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return RawOutcome(reply: Reply(status: status, headers: fields, body: Data(received[(split + 4)...])), closedAfter: closedAfter)
    }
}
