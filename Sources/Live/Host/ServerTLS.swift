import Foundation
import NIOSSL

/// The certificate `fleetlab serve --tls-cert FILE --tls-key FILE` serves every port with:
/// HTTPS and WSS instead of HTTP and WS, for an app on a real phone, where iOS (App
/// Transport Security) and Android (cleartext traffic off by default) want TLS. The files
/// are PEM: the certificate chain, leaf first (as `mkcert` writes it), and its private key.
/// They are read once, when `serve` starts, so a file that is missing or is not what it
/// should be is a clear error before anything listens.
public struct ServerTLS: Sendable {
    public let certificateFile: String
    public let keyFile: String
    let configuration: TLSConfiguration

    public init(certificateFile: String, keyFile: String) throws {
        self.certificateFile = certificateFile
        self.keyFile = keyFile
        let chain = try UnusableTLSFile.certificateChain(certificateFile, option: "--tls-cert")
        guard !chain.isEmpty else { throw UnusableTLSFile(description: "--tls-cert \(certificateFile): no certificate in it") }
        let key = try UnusableTLSFile.privateKey(keyFile, option: "--tls-key")
        var configuration = TLSConfiguration.makeServerConfiguration(certificateChain: chain.map { .certificate($0) }, privateKey: .privateKey(key))
        // TLS 1.2 and 1.3 only, as App Transport Security asks (the library's floor is 1.0).
        configuration.minimumTLSVersion = .tlsv12
        self.configuration = configuration
        // A key that is not the certificate's makes every handshake fail: say so now.
        do { _ = try NIOSSLContext(configuration: configuration) } catch {
            throw UnusableTLSFile(description: "--tls-key \(keyFile) is not the key of --tls-cert \(certificateFile) (\(error))")
        }
    }
}
