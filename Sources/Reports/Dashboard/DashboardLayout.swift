import Foundation

/// Which panels a dashboard shows, in order. Layouts live as JSON in `dashboards/`;
/// `fleetlab report --layout FILE` renders with one.
public struct DashboardLayout: Codable, Equatable, Sendable {
    public var title: String
    public var panels: [String]

    public init(title: String, panels: [String]) {
        self.title = title
        self.panels = panels
    }

    /// The layout of `fleetlab simulate` (kept equal to dashboards/simulation.json by a test).
    public static let simulation = DashboardLayout(
        title: "fleetlab simulation",
        panels: ["summary", "thresholds", "load", "endpoints", "energy", "workflows", "workflow-activity", "workflow-latency", "workflow-steps",
                 "workflow-ticks", "sync-latency", "sync-cadence", "sync-commands", "sync-outbox", "sync-server", "pushes", "chat-latency",
                 "chat-activity", "chat-server", "agent-latency", "agent-activity", "agent-server", "ai-bridge-requests", "ai-bridge-offline",
                 "ai-bridge-relay", "desktop-turns", "desktop-activity", "battery", "power-states", "ticks", "app-states", "lifecycle", "network", "throughput",
                 "sessions", "invariants", "populations", "events", "scenario"])

    /// Reads a layout file and checks that every panel exists.
    public static func load(path: String) throws -> DashboardLayout {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw DashboardError.layout("\(path): cannot read the layout file")
        }
        let layout: DashboardLayout
        do {
            layout = try JSONDecoder().decode(DashboardLayout.self, from: data)
        } catch {
            throw DashboardError.layout("\(path): not a layout ({\"title\": ..., \"panels\": [...]}): \(error)")
        }
        if let unknown = layout.panels.first(where: { DashboardPanels.panel(id: $0) == nil }) {
            throw DashboardError.layout("\(path): unknown panel '\(unknown)'; known panels: "
                + DashboardPanels.all.map(\.id).joined(separator: ", "))
        }
        return layout
    }
}

public enum DashboardError: Error, CustomStringConvertible {
    case layout(String)
    public var description: String {
        switch self {
        case .layout(let message): return message
        }
    }
}
