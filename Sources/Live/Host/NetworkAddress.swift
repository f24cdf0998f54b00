import Foundation

/// This machine's addresses as the network sees them.
enum NetworkAddress {
    /// The IPv4 address a phone on this machine's network reaches it at: the source
    /// address of the default route (the kernel's choice for traffic leaving the
    /// machine), else the first interface that is up and is not loopback, or nil.
    ///
    /// Why the route first: a developer's machine often has interfaces no phone can
    /// reach (a container bridge such as docker0, a VM's host-only network) that may come
    /// first in the kernel's order; the default route goes out of the Wi-Fi or Ethernet
    /// the phone shares.
    static func reachableIPv4() -> String? {
        defaultRouteIPv4() ?? firstIPv4()
    }

    /// The source address the kernel picks for a datagram to a public address: a UDP
    /// socket's `connect` chooses the route and the address and sends nothing.
    /// 203.0.113.1 (TEST-NET-3, RFC 5737) is routed like any public address and never
    /// assigned to a machine. Nil without a default route.
    static func defaultRouteIPv4() -> String? {
        let socket = Foundation.socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        guard socket >= 0 else { return nil }
        defer { close(socket) }
        var target = sockaddr_in()
        target.sin_family = sa_family_t(AF_INET)
        target.sin_port = in_port_t(9).bigEndian
        guard inet_pton(AF_INET, "203.0.113.1", &target.sin_addr) == 1 else { return nil }
        let connected = withUnsafePointer(to: &target) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { return nil }
        var local = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let named = withUnsafeMutablePointer(to: &local) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(socket, $0, &length) }
        }
        guard named == 0, local.sin_addr.s_addr != 0 else { return nil }
        return text(of: local.sin_addr)
    }

    /// The IPv4 address of the first interface that is up and is not loopback, in the
    /// kernel's order, or nil.
    static func firstIPv4() -> String? {
        upInterfaces().first { !$0.loopback }?.address
    }

    /// Every IPv4 address of an interface that is up (tests compare against it).
    static func interfaceIPv4s() -> [String] {
        upInterfaces().map(\.address)
    }

    /// The IPv4 addresses of the interfaces that are up, in the kernel's order.
    static func upInterfaces() -> [(address: String, loopback: Bool)] {
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0, let first = list else { return [] }
        defer { freeifaddrs(list) }
        return sequence(first: first, next: { $0.pointee.ifa_next }).compactMap { entry in
            let flags = Int32(entry.pointee.ifa_flags)
            guard let address = entry.pointee.ifa_addr, address.pointee.sa_family == sa_family_t(AF_INET), flags & Int32(IFF_UP) != 0,
                  let text = text(of: address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee.sin_addr }) else { return nil }
            return (text, flags & Int32(IFF_LOOPBACK) != 0)
        }
    }

    static func text(of address: in_addr) -> String? {
        var address = address
        var text = [CChar](repeating: 0, count: Int(INET_ADDRSTRLEN))
        guard inet_ntop(AF_INET, &address, &text, socklen_t(INET_ADDRSTRLEN)) != nil else { return nil }
        return String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
