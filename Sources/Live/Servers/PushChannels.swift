import Foundation
import Hummingbird
import LabKernel
import NIOCore
import Synchronization

/// The development push channel's subscribers: Server-Sent Events streams, by device.
///
/// A wake is written as `event: wake`, `id: <command id>`, `data: <JSON>` (the command id
/// and, when the device gave a push token, the signed wake metadata a real push would
/// carry). A comment line goes out every `keepAlive` so proxies and the client's idle
/// timer see the stream alive; a stream ends when its client goes away. Nothing is
/// queued for a device that is not connected: as with APNs, a missed push is made up by
/// the device's next regular sync.
final class PushChannels: Sendable {
    struct Subscriber {
        var device: String
        var continuation: AsyncStream<ByteBuffer>.Continuation
    }

    private let subscribers = Mutex<(next: Int, byID: [Int: Subscriber])>((0, [:]))
    let keepAlive: Duration

    init(keepAlive: Duration = .seconds(15)) { self.keepAlive = keepAlive }

    /// A body that stays open for `device` until the client leaves.
    func body(for device: String, first: [UInt8]) -> ResponseBody {
        let (stream, continuation) = AsyncStream<ByteBuffer>.makeStream(bufferingPolicy: .bufferingNewest(64))
        let id = subscribers.withLock { state -> Int in
            state.next += 1
            state.byID[state.next] = Subscriber(device: device, continuation: continuation)
            return state.next
        }
        continuation.yield(ByteBuffer(bytes: first))
        let keepAlive = self.keepAlive
        let pinger = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: keepAlive)
                continuation.yield(ByteBuffer(string: ": keep-alive\n\n"))
            }
        }
        continuation.onTermination = { [weak self] _ in
            pinger.cancel()
            _ = self?.subscribers.withLock { $0.byID.removeValue(forKey: id) }
        }
        return ResponseBody(asyncSequence: stream)
    }

    /// Sends a wake to every stream of `device`; returns how many were open.
    @discardableResult
    func wake(device: String, commandID: String, metadata: JSONValue?) -> Int {
        var data: [String: JSONValue] = ["device_id": .string(device), "command_id": .string(commandID)]
        if let metadata { data["orch8"] = metadata }
        let event = "event: wake\nid: \(commandID)\ndata: \(JSONValue.object(data).canonicalText)\n\n"
        let targets = subscribers.withLock { state in state.byID.values.filter { $0.device == device }.map(\.continuation) }
        for continuation in targets { continuation.yield(ByteBuffer(string: event)) }
        return targets.count
    }

    var count: Int { subscribers.withLock { $0.byID.count } }

    /// Ends every stream (shutdown).
    func closeAll() {
        let all = subscribers.withLock { state in state.byID.values.map(\.continuation) }
        for continuation in all { continuation.finish() }
    }
}
