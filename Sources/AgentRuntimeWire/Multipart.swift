public import LabKernel

/// `multipart/form-data` (RFC 7578), as the runtime's upload route reads it and the
/// client core writes it. The reader is strict and bounded: a malformed body is an error
/// naming what is wrong, never a crash.
public enum Multipart {
    public struct Part: Sendable, Equatable {
        public var name: String
        public var filename: String?
        public var contentType: String?
        public var data: [UInt8]

        public init(name: String, filename: String? = nil, contentType: String? = nil, data: [UInt8]) {
            self.name = name
            self.filename = filename
            self.contentType = contentType
            self.data = data
        }
    }

    public struct Failure: Error, Equatable, Sendable {
        public var message: String
    }

    public static let maxParts = 32

    /// The boundary of a `Content-Type: multipart/form-data; boundary=…` header.
    public static func boundary(contentType: String?) -> String? {
        guard let contentType, contentType.lowercased().hasPrefix("multipart/form-data") else { return nil }
        for parameter in contentType.split(separator: ";").dropFirst() {
            let pair = parameter.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: " \"") }
            if pair.count == 2, pair[0].lowercased() == "boundary", !pair[1].isEmpty, pair[1].utf8.count <= 70 { return pair[1] }
        }
        return nil
    }

    /// The parts of a body.
    public static func parse(_ body: [UInt8], boundary: String) throws(Failure) -> [Part] {
        let delimiter = Array("--\(boundary)".utf8)
        var positions: [Int] = []
        var index = 0
        while let found = find(delimiter, in: body, from: index) {
            positions.append(found)
            index = found + delimiter.count
            guard positions.count <= maxParts + 1 else { throw Failure(message: "more than \(maxParts) parts") }
        }
        guard positions.count >= 2 else { throw Failure(message: "no parts between boundaries") }
        var parts: [Part] = []
        for (start, end) in zip(positions, positions.dropFirst()) {
            var from = start + delimiter.count
            guard from + 1 < body.count, body[from] == 13, body[from + 1] == 10 else { throw Failure(message: "a boundary is not followed by CRLF") }
            from += 2
            guard let headerEnd = find([13, 10, 13, 10], in: body, from: from), headerEnd < end else {
                throw Failure(message: "a part has no blank line after its headers")
            }
            var dataEnd = end
            guard dataEnd - 2 >= headerEnd + 4, body[dataEnd - 2] == 13, body[dataEnd - 1] == 10 else {
                throw Failure(message: "a part does not end with CRLF before the boundary")
            }
            dataEnd -= 2
            let headerText = String(decoding: body[from..<headerEnd], as: UTF8.self)
            var part = Part(name: "", data: Array(body[(headerEnd + 4)..<dataEnd]))
            var named = false
            for line in headerText.split(separator: "\r\n") {
                let pair = line.split(separator: ":", maxSplits: 1)
                guard pair.count == 2 else { throw Failure(message: "a part header is not 'Name: value'") }
                let name = pair[0].lowercased(), value = pair[1].trimmingCharacters(in: " ")
                if name == "content-disposition" {
                    guard value.lowercased().hasPrefix("form-data") else { throw Failure(message: "a part's disposition is not form-data") }
                    for parameter in value.split(separator: ";").dropFirst() {
                        let kv = parameter.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: " ") }
                        guard kv.count == 2 else { continue }
                        let unquoted = kv[1].hasPrefix("\"") && kv[1].hasSuffix("\"") && kv[1].count >= 2 ? String(kv[1].dropFirst().dropLast()) : kv[1]
                        if kv[0] == "name" { part.name = unquoted; named = true }
                        if kv[0] == "filename" { part.filename = unquoted }
                    }
                } else if name == "content-type" {
                    part.contentType = value
                }
            }
            guard named, !part.name.isEmpty else { throw Failure(message: "a part has no name") }
            parts.append(part)
        }
        let tail = positions.last! + delimiter.count
        guard tail + 1 < body.count, body[tail] == UInt8(ascii: "-"), body[tail + 1] == UInt8(ascii: "-") else {
            throw Failure(message: "the body does not end with the closing boundary")
        }
        return parts
    }

    /// A body of these parts, and its `Content-Type`.
    public static func encode(_ parts: [Part], boundary: String) -> (body: [UInt8], contentType: String) {
        var body: [UInt8] = []
        for part in parts {
            body += Array("--\(boundary)\r\nContent-Disposition: form-data; name=\"\(part.name)\"".utf8)
            if let filename = part.filename { body += Array("; filename=\"\(filename.replacingQuotes)\"".utf8) }
            body += [13, 10]
            if let type = part.contentType { body += Array("Content-Type: \(type)\r\n".utf8) }
            body += [13, 10]
            body += part.data
            body += [13, 10]
        }
        body += Array("--\(boundary)--\r\n".utf8)
        return (body, "multipart/form-data; boundary=\(boundary)")
    }

    static func find(_ needle: [UInt8], in haystack: [UInt8], from start: Int) -> Int? {
        guard !needle.isEmpty, haystack.count >= needle.count, start <= haystack.count - needle.count else { return nil }
        var i = start
        let first = needle[0]
        while i <= haystack.count - needle.count {
            if haystack[i] == first {
                var j = 1
                while j < needle.count && haystack[i + j] == needle[j] { j += 1 }
                if j == needle.count { return i }
            }
            i += 1
        }
        return nil
    }
}

extension StringProtocol {
    /// Without leading and trailing characters of `set`.
    func trimmingCharacters(in set: String) -> String {
        let chars = Set(set)
        var slice = Substring(self)
        while let first = slice.first, chars.contains(first) { slice = slice.dropFirst() }
        while let last = slice.last, chars.contains(last) { slice = slice.dropLast() }
        return String(slice)
    }
}

extension String {
    var replacingQuotes: String { String(map { $0 == "\"" ? "'" : $0 }) }
}
