import ArgumentParser
import Foundation
import Live

/// Which proxy (HTTP or SOCKS5) a command's clients go through: `--proxy`, else the environment's
/// `HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY` and `NO_PROXY` as curl and k6 read them (loopback servers
/// always direct then). On every command that connects out (`loadtest`, `device`,
/// `ai-daemon`).
struct ClientProxyOptions: ParsableArguments {
    @Option(help: "Reach every server through this proxy: http://host:port (https:// servers and sockets through its CONNECT tunnel) or socks5://host:port (every connection in a tunnel); NO_PROXY still applies. Without it, HTTP_PROXY, HTTPS_PROXY, ALL_PROXY and NO_PROXY from the environment, loopback always direct. A proxy's user and password belong in the environment's URL, out of ps.")
    var proxy: String?

    /// The routes, a proxy URL that cannot be used refused now (exit 2), before anything is
    /// contacted.
    func make(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> ProxyRoutes {
        do {
            if let proxy { return .every(try ClientProxy(proxy), noProxy: environment["NO_PROXY"] ?? environment["no_proxy"]) }
            return try .environment(environment)
        } catch {
            throw CLIFailure.badInput("\(proxy == nil ? "HTTP_PROXY, HTTPS_PROXY or ALL_PROXY" : "--proxy"): \(error)")
        }
    }
}

extension ProxyRoutes {
    /// What a summary says of the proxies `urls` go through (never a proxy's credentials):
    /// nothing when they all go direct.
    func note(for urls: some Sequence<String>) -> String {
        let used = Set(urls.compactMap { proxy(forURL: $0)?.description })
        return used.isEmpty ? "" : " (via proxy " + used.sorted().joined(separator: ", ") + ")"
    }
}
