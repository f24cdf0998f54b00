import Foundation
public import Hummingbird
import HTTPTypes
public import LabKernel
import NIOCore

/// A request context that knows the address the connection came from: the key of
/// per-client limits, which a header could forge.
public struct PeerRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    public let peer: String?

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        peer = source.channel.remoteAddress?.ipAddress
    }
}

/// Turns Hummingbird requests into `HTTPRequestMessage`s for a sans-I/O server core and
/// its `HTTPResponseMessage`s back into responses. `handle` runs the core (under the
/// adapter's lock) and returns what to send. A core that accepts a long-lived stream
/// answers with its first bytes and `Content-Type: text/event-stream`; `stream` then
/// gives the body that stays open (Server-Sent Events), or nil to send the answer as it is.
public struct CoreResponder: HTTPResponder {
    public typealias Context = PeerRequestContext
    /// Larger bodies are refused with 413 before the core sees them.
    public var maxBodyBytes = 8 << 20
    let handle: @Sendable (HTTPRequestMessage) async throws -> HTTPResponseMessage
    let stream: (@Sendable (HTTPResponseMessage) -> ResponseBody?)?

    public init(maxBodyBytes: Int = 8 << 20, handle: @escaping @Sendable (HTTPRequestMessage) async throws -> HTTPResponseMessage,
                stream: (@Sendable (HTTPResponseMessage) -> ResponseBody?)? = nil) {
        self.maxBodyBytes = maxBodyBytes
        self.handle = handle
        self.stream = stream
    }

    public func respond(to request: Request, context: Context) async throws -> Response {
        let body: ByteBuffer
        do {
            body = try await Self.body(of: request, upTo: maxBodyBytes)
        } catch .tooLarge {
            return Self.response(.error(413, "payload too large", "the body is over \(maxBodyBytes) bytes"))
        } catch .unreadable(let reason) {
            return Self.response(.error(400, "bad request", reason))
        }
        let message = Self.message(request, body: body, peer: context.peer)
        FaultInjection.check(path: message.path)
        if let injected = await FaultInjection.play() { return Self.response(injected) }
        do {
            let answer = try await handle(message)
            if answer.status == 200, answer.header("content-type") == "text/event-stream", let body = stream?(answer) {
                var response = Self.response(answer)
                response.body = body
                return response
            }
            return Self.response(answer)
        } catch {
            return Self.response(.json(500, ["error": "internal server error"]))
        }
    }

    /// Why a request's body was not read.
    enum BodyRefusal: Error {
        /// Over the server's limit (413).
        case tooLarge
        /// Chunked framing the parser refused (a chunk size that is not hex, say): the
        /// client's mistake, not its size (400).
        case unreadable(String)
    }

    /// The whole body of `request`, up to `limit` bytes.
    static func body(of request: Request, upTo limit: Int) async throws(BodyRefusal) -> ByteBuffer {
        do {
            return try await request.body.collect(upTo: limit)
        } catch is NIOTooManyBytesError {
            throw .tooLarge
        } catch {
            throw .unreadable("the body could not be read as HTTP/1.1 (\(error))")
        }
    }

    /// A request as a core reads it: method, path with its query, headers by canonical
    /// name, the collected body, and the address it came from.
    static func message(_ request: Request, body: ByteBuffer, peer: String?) -> HTTPRequestMessage {
        var headers: [String: String] = [:]
        for field in request.headers { headers[field.name.canonicalName] = field.value }
        let target = request.uri.query.map { "\(request.uri.path)?\($0)" } ?? request.uri.path
        return HTTPRequestMessage(method: request.method.rawValue, target: target, headers: headers, body: Array(body.readableBytesView), peer: peer)
    }

    static func response(_ message: HTTPResponseMessage) -> Response {
        var fields = HTTPFields()
        for header in message.headers {
            if let name = HTTPField.Name(header.name) { fields.append(HTTPField(name: name, value: header.value)) }
        }
        return Response(status: HTTPResponse.Status(code: message.status), headers: fields,
                        body: ResponseBody(byteBuffer: ByteBuffer(bytes: message.body)))
    }
}
