import Foundation

/// Checks whether a TCP port can be bound, with a plain POSIX socket.
enum PortProbe {
    enum Result: Equatable {
        case free
        case inUse
        case failed(String)
    }

    static func check(host: String, port: Int) -> Result {
        guard (1...65_535).contains(port) else { return .failed("\(port) is not a TCP port (1-65535)") }
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV
        var info: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(host, String(port), &hints, &info)
        guard rc == 0, let first = info else {
            return .failed("cannot resolve host '\(host)': \(String(cString: gai_strerror(rc)))")
        }
        defer { freeaddrinfo(info) }
        let fd = socket(first.pointee.ai_family, first.pointee.ai_socktype, first.pointee.ai_protocol)
        guard fd >= 0 else { return .failed(String(cString: strerror(errno))) }
        defer { close(fd) }
        var yes: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        if bind(fd, first.pointee.ai_addr, first.pointee.ai_addrlen) != 0 {
            let code = errno
            return code == EADDRINUSE ? .inUse : .failed(String(cString: strerror(code)))
        }
        return .free
    }
}
