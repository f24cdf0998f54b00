import Foundation
import NIOCore
import NIOPosix

/// Why a connection could not be made, in the words a person reads: the system's reason
/// ("Connection refused", "Name or service not known"), not NIO's wrapping of it (its
/// text carries the failing function, an errno and an unbalanced parenthesis).
enum ConnectFailure {
    static func reason(_ error: any Error) -> String {
        switch error {
        case let failure as IOError: String(cString: strerror(failure.errnoCode))
        case let unknown as SocketAddressError.UnknownHost: unknown.errorDescription.isEmpty ? "no address for the name" : unknown.errorDescription
        case let attempts as NIOConnectionError:
            attempts.connectionErrors.first.map { reason($0.error) } ?? "no address for the name"
        default: "\(error)"
        }
    }
}
