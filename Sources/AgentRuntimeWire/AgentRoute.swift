public import LabKernel

/// The runtime's HTTP routes as templates (`POST /api/chats/{app}/{workflow}/start`), so
/// latency is recorded per route and not per chat, in the simulator and in load tests alike.
public enum AgentRoute {
    public static func template(_ request: HTTPRequestMessage) -> String {
        let segments = request.segments
        switch (segments.first, segments.count) {
        case ("api", 5) where segments[1] == "chats" && segments[4] == "start": return "\(request.method) /api/chats/{app}/{workflow}/start"
        case ("chat", 5): return "\(request.method) /chat/{app}/{chat}/{user}/input"
        default: return "\(request.method) \(request.path)"
        }
    }
}
