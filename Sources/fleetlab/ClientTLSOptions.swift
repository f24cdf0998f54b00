import ArgumentParser
import Live

/// How a command's clients trust `https://` and `wss://` servers, and the certificate they
/// present to one that asks: the same four options on every command that connects out
/// (`loadtest`, `device`, `ai-daemon`).
struct ClientTLSOptions: ParsableArguments {
    @Option(name: .customLong("ca-file"), help: "https:// servers: trust this CA's certificates (PEM) as well as the system's, as a staging deployment signed by its own CA (or fleetlab serve with an mkcert certificate) needs.")
    var caFile: String?

    @Flag(help: "https:// servers: do not check their certificates at all (a throwaway server's self-signed one).")
    var insecure = false

    @Option(name: .customLong("client-cert"), help: "https:// servers that ask for a client certificate (mutual TLS): this PEM chain, leaf first, with --client-key.")
    var clientCert: String?

    @Option(name: .customLong("client-key"), help: "The PEM private key of --client-cert.")
    var clientKey: String?

    /// The clients' TLS, its files read now when any server is `https://` or a file is
    /// given, so a bad one is exit 2 before anything is contacted.
    func make(httpsTargets: Bool) throws -> ClientTLS {
        guard caFile == nil || !insecure else { throw CLIFailure.badInput("--ca-file and --insecure: trust a CA, or check nothing, not both") }
        guard (clientCert == nil) == (clientKey == nil) else {
            throw CLIFailure.badInput(clientCert == nil ? "--client-key needs --client-cert, the certificate it is the key of" : "--client-cert needs --client-key, its private key")
        }
        let tls = ClientTLS(caFile: caFile, verify: !insecure, clientCertificate: clientCert, clientKey: clientKey)
        if caFile != nil || clientCert != nil || httpsTargets {
            do { try tls.validate() } catch { throw CLIFailure.badInput("\(error)") }
        }
        return tls
    }
}
