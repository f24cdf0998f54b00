import Foundation
import Synchronization

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
            Self.readRequests(on: connection) { number in
                if number < count { Self.write(response, to: connection) }
                return true
            }
        }
    }

    /// Reads requests on `connection` (each up to its blank line, a body without one) and
    /// hands `next` the number of each as it arrives (0, 1, …), until the peer closes or
    /// `next` returns false.
    static func readRequests(on connection: Int32, _ next: (Int) -> Bool) {
        var seen: [UInt8] = [], handed = 0
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let read = read(connection, &buffer, buffer.count)
            guard read > 0 else { return }
            seen += buffer[..<read]
            let requests = String(decoding: seen, as: UTF8.self).components(separatedBy: "\r\n\r\n").count - 1
            while handed < requests {
                guard next(handed) else { return }
                handed += 1
            }
        }
    }

    static func write(_ response: String, to connection: Int32) {
        _ = Array(response.utf8).withUnsafeBytes { Foundation.write(connection, $0.baseAddress, $0.count) }
    }

    /// What `answerThenClose` saw: connections accepted, requests read.
    public final class Tally: Sendable {
        let counts = Mutex((connections: 0, requests: 0))
        public var connections: Int { counts.withLock { $0.connections } }
        public var requests: Int { counts.withLock { $0.requests } }
        /// Ends the serving thread within 100 ms.
        public func stop() { stopped.withLock { $0 = true } }
        let stopped = Mutex(false)
    }

    /// Plays a server whose keep-alive connections end under a request, as one whose idle
    /// timeout runs out as the request arrives: on each connection, one at a time, it
    /// answers the first `count` requests with `response` (each up to its blank line, a body
    /// without one), then at the next closes without a byte of answer.
    public func answerThenClose(_ count: Int, with response: String) -> Tally {
        let tally = Tally()
        Thread.detachNewThread { [self] in
            while !tally.stopped.withLock({ $0 }) {
                var ready = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
                guard poll(&ready, 1, 100) > 0 else { continue }
                let connection = accept(descriptor, nil, nil)
                guard connection >= 0 else { return }
                tally.counts.withLock { $0.connections += 1 }
                Self.readRequests(on: connection) { number in
                    tally.counts.withLock { $0.requests += 1 }
                    guard number < count else { return false }
                    Self.write(response, to: connection)
                    return true
                }
                close(connection)
            }
        }
        return tally
    }

    deinit {
        shutdown(descriptor, Int32(SHUT_RDWR))
        close(descriptor)
    }
}
