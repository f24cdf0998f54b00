public import Hummingbird
import LabKernel
import Logging
import NIOCore
public import ServiceLifecycle

/// One HTML page served while a run goes on, rendered afresh at each request: a load
/// test's dashboard from the results written so far (`fleetlab loadtest --dashboard-port`),
/// as Locust's web UI and k6's web dashboard show a run while it runs. `GET /` is the page
/// (503 with a JSON body until there is one); every other path is a JSON 404. It listens on
/// the host's address, 127.0.0.1 unless told otherwise, and takes no input.
public struct LivePageServer: ReferenceServer {
    public let name = "dashboard"
    public let defaultPort = 0
    public let summary: String
    /// The page now (nil: nothing to show yet).
    public let page: @Sendable () -> String?

    public init(summary: String, page: @escaping @Sendable () -> String?) {
        self.summary = summary
        self.page = page
    }

    public func makeService(
        configuration: ApplicationConfiguration, transport: ServerTransport, onRunning: @escaping @Sendable (any Channel) async -> Void
    ) throws -> any Service {
        let router = Router()
        router.add(middleware: JSONErrorMiddleware())
        let page = page
        router.get("/") { _, _ -> Response in
            guard let html = page() else { throw HTTPError(.serviceUnavailable, message: "no results yet") }
            return Response(status: .ok, headers: [.contentType: "text/html; charset=utf-8", .cacheControl: "no-store"],
                            body: .init(byteBuffer: ByteBuffer(string: html)))
        }
        // Quiet: the command that serves it prints the URL itself, beside its own output.
        var logger = Logger(label: "fleetlab.dashboard")
        logger.logLevel = .warning
        return Application(router: router, server: try transport.http1(), configuration: configuration, onServerRunning: onRunning, logger: logger)
    }
}
