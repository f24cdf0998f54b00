import HummingbirdWebSocket
import NIOWebSocket
import ServiceLifecycle

/// What a server core asks of one socket: a text frame, or a close.
enum SocketCommand: Sendable {
    case text(String)
    case close(UInt16, String)
}

/// Runs one accepted WebSocket for a server whose core decides what to send: a writer
/// drains `commands` to the wire in order, a reader hands each text frame to `received`,
/// and when the client goes `ended` runs (the server forgets the connection and finishes
/// `commands`). A server that shuts down closes the socket (1001) and stops reading, so a
/// client that never answers the close cannot hold the shutdown up. In a brownout
/// (`fleetlab serve --faults`) each frame waits before the core sees it, as a request does
/// (`FaultInjection`); the frames after it wait behind it, so their order is kept.
func runSocket(inbound: WebSocketInboundStream, outbound: WebSocketOutboundWriter, commands: AsyncStream<SocketCommand>,
               closer: AsyncStream<SocketCommand>.Continuation, maxMessage: Int,
               received: @escaping @Sendable (String) -> Void, ended: () -> Void) async {
    let writer = Task {
        for await command in commands {
            switch command {
            case .text(let text): try? await outbound.write(.text(text))
            case .close(let code, let reason):
                try? await outbound.close(.unknown(code), reason: reason)
                return
            }
        }
    }
    let reader = Task {
        do {
            for try await message in inbound.messages(maxSize: maxMessage) {
                guard case .text(let text) = message else { continue }
                try await FaultInjection.hold()
                received(text)
            }
        } catch {}
    }
    await withGracefulShutdownHandler {
        await reader.value
    } onGracefulShutdown: {
        reader.cancel()
        closer.yield(.close(1001, "server shutting down"))
    }
    ended()
    _ = await writer.value
}
