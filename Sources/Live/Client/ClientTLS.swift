import Foundation
import NIOSSL
import Synchronization

/// How the live clients speak TLS to an `https://` server (and `wss://` for its sockets): a
/// load test pointed at a staging deployment rather than `fleetlab serve` on loopback.
///
/// Certificates are checked against the system's trusted roots (Debian's
/// `/etc/ssl/certs`), plus a CA of the deployment's own when given (`caFile`, PEM: the
/// usual case for staging), host names included. `verify: false` skips the check
/// (k6's `insecureSkipTLSVerify`), for a throwaway server with a self-signed certificate;
/// the summary says so. A deployment that asks its clients for a certificate (mutual TLS)
/// gets `clientCertificate` (a PEM chain, leaf first) and its `clientKey`, as k6's
/// `tlsAuth` gives them. The context is made on the first `https://` connection, so a client
/// that never makes one never reads a trust store.
public final class ClientTLS: Sendable {
    /// The system's trusted roots, certificates checked.
    public static let system = ClientTLS()

    public let caFile: String?
    public let verify: Bool
    public let clientCertificate: String?
    public let clientKey: String?
    let context = Mutex<Result<NIOSSLContext, any Error>?>(nil)

    public init(caFile: String? = nil, verify: Bool = true, clientCertificate: String? = nil, clientKey: String? = nil) {
        self.caFile = caFile
        self.verify = verify
        self.clientCertificate = clientCertificate
        self.clientKey = clientKey
    }

    /// Checks the settings now (a CA file that cannot be read or is not PEM), so a command
    /// can refuse them before it contacts anything.
    public func validate() throws {
        _ = try sslContext()
    }

    /// The handler that goes first in a connection's pipeline to `host`: SNI and host-name
    /// checks with a name, the address's own check with an IP literal.
    func handler(host: String) throws -> NIOSSLClientHandler {
        try NIOSSLClientHandler(context: sslContext(), serverHostname: Self.isIPLiteral(host) ? nil : host)
    }

    func sslContext() throws -> NIOSSLContext {
        try context.withLock { cached in
            if let cached { return try cached.get() }
            let made = Result<NIOSSLContext, any Error> { try NIOSSLContext(configuration: configuration()) }
            cached = made
            return try made.get()
        }
    }

    func configuration() throws -> TLSConfiguration {
        var configuration = TLSConfiguration.makeClientConfiguration()
        if let caFile {
            do { configuration.additionalTrustRoots = [.certificates(try NIOSSLCertificate.fromPEMFile(caFile))] } catch {
                throw UnusableTLSFile(description: "--ca-file \(caFile): cannot use it as trusted certificates (\(error))")
            }
        }
        if !verify { configuration.certificateVerification = .none }
        if let clientCertificate, let clientKey {
            configuration.certificateChain = try UnusableTLSFile.certificateChain(clientCertificate, option: "--client-cert").map { .certificate($0) }
            configuration.privateKey = .privateKey(try UnusableTLSFile.privateKey(clientKey, option: "--client-key"))
        }
        return configuration
    }

    /// Whether `host` is an IP address rather than a name (SNI carries names only).
    static func isIPLiteral(_ host: String) -> Bool {
        var v4 = in_addr(), v6 = in6_addr()
        return inet_pton(AF_INET, host, &v4) == 1 || inet_pton(AF_INET6, host, &v6) == 1
    }
}

/// A TLS file (a certificate chain, a private key, a CA's certificates) that cannot be
/// used, and why, naming the option it came from: `ClientTLS`'s and `ServerTLS`'s.
public struct UnusableTLSFile: Error, CustomStringConvertible {
    public var description: String

    /// The PEM certificate chain in `file`, leaf first, given with `option`.
    static func certificateChain(_ file: String, option: String) throws -> [NIOSSLCertificate] {
        do { return try NIOSSLCertificate.fromPEMFile(file) } catch {
            throw UnusableTLSFile(description: "\(option) \(file): not a PEM certificate chain (\(error))")
        }
    }

    /// The PEM private key in `file`, given with `option`.
    static func privateKey(_ file: String, option: String) throws -> NIOSSLPrivateKey {
        do { return try NIOSSLPrivateKey(file: file, format: .pem) } catch {
            throw UnusableTLSFile(description: "\(option) \(file): not a PEM private key (\(error))")
        }
    }
}
