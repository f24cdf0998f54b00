import Foundation

/// A listening TCP socket on 127.0.0.1 that holds a port, for "port taken" tests, and that
/// can play a server that answers its first request and then falls silent.
public final class TCPListener: Sendable {
    public let port: Int
    private let descriptor: Int32

    public init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(fd, 1) == 0 else {
            close(fd)
            throw POSIXError(.EADDRINUSE)
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        descriptor = fd
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    /// Accepts one connection on a thread of its own, answers its first `count` requests
    /// (each up to its blank line: GETs) with `response`, then reads and never answers again.
    public func answerFirstRequests(_ count: Int, with response: String) {
        // The thread holds the listener: it must not close while it serves.
        Thread.detachNewThread { [self] in
            let connection = accept(descriptor, nil, nil)
            guard connection >= 0 else { return }
            defer { close(connection) }
            var seen: [UInt8] = [], answered = 0
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let read = read(connection, &buffer, buffer.count)
                guard read > 0 else { return }
                seen += buffer[..<read]
                let requests = String(decoding: seen, as: UTF8.self).components(separatedBy: "\r\n\r\n").count - 1
                while answered < min(requests, count) {
                    answered += 1
                    _ = Array(response.utf8).withUnsafeBytes { write(connection, $0.baseAddress, $0.count) }
                }
            }
        }
    }

    deinit {
        shutdown(descriptor, Int32(SHUT_RDWR))
        close(descriptor)
    }
}
