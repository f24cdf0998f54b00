public import Foundation
import NIOCore
import NIOPosix
import NIOSSL

/// A TLS front for a plain server on loopback, as a deployment's load balancer is: it takes
/// TLS on a port of its own (a certificate signed by a test CA, `TestCertificates`) and
/// passes the bytes both ways to `127.0.0.1:backendPort`. HTTP keep-alive and WebSocket
/// upgrades go through untouched.
public final class TLSProxy: @unchecked Sendable {
    // Unchecked: the channel is set once in init and only closed after.
    public let port: Int
    let listener: any Channel

    /// `requireClientCertificate`: a handshake without a client certificate the test CA
    /// signed fails (mutual TLS).
    public init(certificates: TestCertificates, backendPort: Int, requireClientCertificate: Bool = false) throws {
        let chain = try NIOSSLCertificate.fromPEMFile(certificates.serverCertificate).map { NIOSSLCertificateSource.certificate($0) }
        let key = try NIOSSLPrivateKey(file: certificates.serverKey, format: .pem)
        var configuration = TLSConfiguration.makeServerConfiguration(certificateChain: chain, privateKey: .privateKey(key))
        if requireClientCertificate {
            configuration.certificateVerification = .noHostnameVerification
            configuration.trustRoots = .file(certificates.ca)
        }
        let context = try NIOSSLContext(configuration: configuration)
        listener = try ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { inbound in
                ClientBootstrap(group: inbound.eventLoop).connect(host: "127.0.0.1", port: backendPort).flatMapThrowing { outbound in
                    let (front, back) = Glue.pair()
                    try inbound.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: context))
                    try inbound.pipeline.syncOperations.addHandler(front)
                    try outbound.pipeline.syncOperations.addHandler(back)
                }
            }
            .bind(host: "127.0.0.1", port: 0).wait()
        port = listener.localAddress?.port ?? 0
    }

    public var url: String { "https://127.0.0.1:\(port)" }

    public func stop() { listener.close(promise: nil) }

    deinit { stop() }

    /// Two handlers, one on each connection, each writing what its side reads to the other.
    final class Glue: ChannelDuplexHandler, @unchecked Sendable {
        // Unchecked: both connections of a pair live on one event loop.
        typealias InboundIn = ByteBuffer
        typealias OutboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer
        weak var partner: Glue?
        var context: ChannelHandlerContext?

        static func pair() -> (Glue, Glue) {
            let (a, b) = (Glue(), Glue())
            a.partner = b
            b.partner = a
            return (a, b)
        }

        func handlerAdded(context: ChannelHandlerContext) { self.context = context }
        func handlerRemoved(context: ChannelHandlerContext) { self.context = nil }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            partner?.context?.write(data, promise: nil)
        }

        func channelReadComplete(context: ChannelHandlerContext) { partner?.context?.flush() }

        func channelInactive(context: ChannelHandlerContext) { partner?.context?.close(promise: nil) }

        func errorCaught(context: ChannelHandlerContext, error: any Error) { context.close(promise: nil) }
    }
}

/// A CA and a server certificate for 127.0.0.1 and localhost, made with Debian's `openssl`
/// in a scratch directory: what `TLSProxy` serves and a client is told to trust.
public struct TestCertificates: Sendable {
    public let ca: String
    public let serverCertificate: String
    public let serverKey: String
    /// A client certificate the CA signed, for mutual TLS.
    public let clientCertificate: String
    public let clientKey: String

    public init(in directory: URL) throws {
        let dir = directory.path
        ca = dir + "/ca.pem"
        serverCertificate = dir + "/server.pem"
        serverKey = dir + "/server.key"
        clientCertificate = dir + "/client.pem"
        clientKey = dir + "/client.key"
        let steps: [[String]] = [
            ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", dir + "/ca.key", "-out", ca,
             "-days", "2", "-subj", "/CN=fleetlab test CA"],
            ["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", serverKey, "-out", dir + "/server.csr",
             "-subj", "/CN=localhost"],
            ["x509", "-req", "-in", dir + "/server.csr", "-CA", ca, "-CAkey", dir + "/ca.key", "-CAcreateserial", "-out", serverCertificate,
             "-days", "2", "-extfile", dir + "/san.cnf"],
            ["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", clientKey, "-out", dir + "/client.csr",
             "-subj", "/CN=fleetlab load generator"],
            ["x509", "-req", "-in", dir + "/client.csr", "-CA", ca, "-CAkey", dir + "/ca.key", "-CAcreateserial", "-out", clientCertificate,
             "-days", "2", "-extfile", dir + "/client.cnf"],
        ]
        try Data("extendedKeyUsage=clientAuth\n".utf8).write(to: URL(fileURLWithPath: dir + "/client.cnf"))
        try Data("subjectAltName=IP:127.0.0.1,DNS:localhost\n".utf8).write(to: URL(fileURLWithPath: dir + "/san.cnf"))
        for arguments in steps {
            let result = try CommandRunner.run("/usr/bin/openssl", arguments, in: directory)
            guard result.status == 0 else { throw Failure(description: "openssl \(arguments.first ?? ""): \(result.stderr)") }
        }
    }

    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }
}
