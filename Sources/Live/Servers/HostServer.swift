public import Hummingbird
import LabKernel
import NIOCore
public import ServiceLifecycle

/// The host's own server: liveness and version, and the list of the other servers with
/// the ports they really listen on (and, under the supervisor, their worker process and
/// how often it was restarted).
public struct HostServer: ReferenceServer {
    public let name = "host"
    public let defaultPort: Int
    public let summary = "fleetlab host (health, version, endpoint list)"
    public let version: String
    /// Every other server, read at each `/version`: ports and restarts change at run time.
    public let catalog: @Sendable () -> [ServerListing]

    public struct ServerListing: Sendable, Codable, Equatable {
        public var name: String
        public var summary: String
        public var port: Int
        public var pid: Int32?
        public var restarts: Int?
        /// What a `--faults` window does to it now (`down`, `slowed ×40`); absent otherwise.
        public var fault: String?

        public init(name: String, summary: String, port: Int, pid: Int32? = nil, restarts: Int? = nil, fault: String? = nil) {
            self.name = name
            self.summary = summary
            self.port = port
            self.pid = pid
            self.restarts = restarts
            self.fault = fault
        }
    }

    public init(defaultPort: Int = 7700, version: String, catalog: @escaping @Sendable () -> [ServerListing] = { [] }) {
        self.defaultPort = defaultPort
        self.version = version
        self.catalog = catalog
    }

    struct Health: ResponseEncodable { let status: String }
    struct Version: ResponseEncodable {
        let name: String
        let version: String
        let servers: [ServerListing]
    }

    public func makeService(
        configuration: ApplicationConfiguration, transport: ServerTransport, onRunning: @escaping @Sendable (any Channel) async -> Void
    ) throws -> any Service {
        let router = Router()
        router.add(middleware: JSONErrorMiddleware())
        router.get("/health") { _, _ in Health(status: "ok") }
        let version = version, catalog = catalog
        router.get("/version") { _, _ in Version(name: "fleetlab", version: version, servers: catalog()) }
        return Application(router: router, server: try transport.http1(), configuration: configuration, onServerRunning: onRunning)
    }
}

/// Gives every error a JSON body (`{"error": "..."}`), the shape orch8 uses, so a client
/// never has to parse an empty or HTML error.
public struct JSONErrorMiddleware<Context: RequestContext>: RouterMiddleware {
    public init() {}

    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as HTTPError {
            let message = error.body ?? error.status.reasonPhrase.lowercased()
            return JSONErrorMiddleware.response(status: error.status, message: message)
        } catch {
            return JSONErrorMiddleware.response(status: .internalServerError, message: "internal server error")
        }
    }

    static func response(status: HTTPResponse.Status, message: String) -> Response {
        let body = JSONValue.object(["error": .string(message)]).canonicalText
        return Response(status: status, headers: [.contentType: "application/json"],
                        body: .init(byteBuffer: ByteBuffer(string: body)))
    }
}
