extension HTTPRequestMessage {
    /// The route for per-endpoint figures: the method and the path with every segment
    /// that names a record (a number, or an id such as a UUID) as `{id}`:
    /// `POST /api/v1/channels/{id}/messages`.
    public var route: String {
        var text = method + " "
        for segment in path.split(separator: "/") {
            text += "/"
            text += Self.namesRecord(segment) ? "{id}" : String(segment)
        }
        return path.isEmpty || path == "/" ? text + "/" : text
    }

    static func namesRecord(_ segment: Substring) -> Bool {
        let digits = segment.utf8.filter { $0 >= 48 && $0 <= 57 }.count
        return digits == segment.utf8.count || (segment.utf8.count >= 16 && digits > 0)
    }

    /// Bytes of the request as HTTP/1.1 puts it on the wire: request line, headers, body
    /// (with a Host and a Content-Length the drivers add).
    public var wireSize: Int {
        var size = method.utf8.count + path.utf8.count + " HTTP/1.1\r\n".utf8.count + 1
        for (key, value) in query { size += key.utf8.count + value.utf8.count + 2 }
        for (name, value) in headers { size += name.utf8.count + value.utf8.count + 4 }
        return size + "Host: api.example.com\r\nContent-Length: 0000\r\n\r\n".utf8.count + body.count
    }
}

extension HTTPResponseMessage {
    /// Bytes of the response as HTTP/1.1 puts it on the wire.
    public var wireSize: Int {
        var size = "HTTP/1.1 200 OK\r\n".utf8.count
        for header in headers { size += header.name.utf8.count + header.value.utf8.count + 4 }
        return size + "Content-Length: 0000\r\n\r\n".utf8.count + body.count
    }
}
