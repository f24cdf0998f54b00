import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A small blocking WebSocket client over a real socket (RFC 6455: handshake, masked
/// text frames out, unmasked frames in), for loopback tests of servers' `/ws`.
public final class WebSocketProbe: @unchecked Sendable {
    public enum Frame: Equatable, Sendable {
        case text(String)
        case close(UInt16)
    }

    public enum Failure: Error { case connect(Int32), handshake(String), closed }

    let fd: Int32
    var buffer: [UInt8] = []

    public init(port: Int, target: String) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let status = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard status == 0 else { close(fd); throw Failure.connect(errno) }
        let key = Data((0..<16).map { _ in UInt8.random(in: 0...255) }).base64EncodedString()
        let request = "GET \(target) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Key: \(key)\r\nSec-WebSocket-Version: 13\r\n\r\n"
        try write(Array(request.utf8))
        var head: [UInt8] = []
        while !head.suffix(4).elementsEqual([13, 10, 13, 10]) {
            guard let byte = try read(1, timeout: 5)?.first else { throw Failure.handshake("no answer") }
            head.append(byte)
        }
        let text = String(decoding: head, as: UTF8.self)
        guard text.hasPrefix("HTTP/1.1 101") else { throw Failure.handshake(text) }
    }

    deinit { close(fd) }

    public func send(_ text: String) throws { try send(opcode: 0x1, Array(text.utf8)) }

    /// One masked frame, as a client must send it.
    func send(opcode: UInt8, _ payload: [UInt8]) throws {
        var frame: [UInt8] = [0x80 | opcode]
        if payload.count < 126 {
            frame.append(0x80 | UInt8(payload.count))
        } else {
            frame.append(0x80 | 126)
            frame += [UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
        }
        let mask = (0..<4).map { _ in UInt8.random(in: 0...255) }
        frame += mask
        frame += payload.enumerated().map { $0.element ^ mask[$0.offset % 4] }
        try write(frame)
    }

    /// The next frame, or nil when none arrives within `timeout` seconds.
    public func receive(timeout: Double) throws -> Frame? {
        guard let header = try read(2, timeout: timeout) else { return nil }
        // 126 and 127 mark 16- and 64-bit lengths; a 16-bit length of 127 is just a length.
        var length = Int(header[1] & 0x7F)
        switch length {
        case 126: length = try read(2, timeout: 5)!.reduce(0) { $0 << 8 | Int($1) }
        case 127: length = try read(8, timeout: 5)!.reduce(0) { $0 << 8 | Int($1) }
        default: break
        }
        let payload = length == 0 ? [] : try read(length, timeout: 5) ?? []
        switch header[0] & 0x0F {
        case 0x1: return .text(String(decoding: payload, as: UTF8.self))
        case 0x8: return .close(payload.count >= 2 ? UInt16(payload[0]) << 8 | UInt16(payload[1]) : 1005)
        case 0x9:
            // A server that pings (Hummingbird does every 30 s) closes a client that never
            // answers; a test that waits long on a busy machine must stay connected.
            try send(opcode: 0xA, payload)
            return try receive(timeout: timeout)
        default: return try receive(timeout: timeout)  // pong, binary: not for these tests
        }
    }

    func write(_ bytes: [UInt8]) throws {
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw Failure.closed }
            sent += n
        }
    }

    /// Exactly `count` bytes, or nil if the first byte does not come within `timeout`.
    func read(_ count: Int, timeout: Double) throws -> [UInt8]? {
        while buffer.count < count {
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&poller, 1, Int32(timeout * 1000))
            if ready < 0 && errno == EINTR { continue }
            if ready == 0 { if buffer.isEmpty { return nil } else { continue } }
            var chunk = [UInt8](repeating: 0, count: 65_536)
            let n = recv(fd, &chunk, chunk.count, 0)
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw Failure.closed }
            buffer += chunk.prefix(n)
        }
        defer { buffer.removeFirst(count) }
        return Array(buffer.prefix(count))
    }
}
