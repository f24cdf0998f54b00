public import LabStore

/// One panel of a dashboard.
///
/// To add a panel: write a type conforming to this protocol in `Panels/`, add it to
/// `DashboardPanels.all`, and put its `id` in a layout (`DashboardLayout.simulation` and
/// `dashboards/simulation.json`). A panel that has nothing to show for a run returns nil
/// and is left out, so later issues' panels cost nothing on runs without their data.
public protocol DashboardPanel: Sendable {
    /// The stable name a layout uses.
    var id: String { get }
    var title: String { get }
    /// A one-line explanation under the title.
    var caption: String { get }
    /// Spans the full width of the page.
    var wide: Bool { get }
    func body(for results: RunResults, context: DashboardContext) -> String?
}

extension DashboardPanel {
    public var wide: Bool { false }
    public var caption: String { "" }
}

/// What panels share: the time axis and series lookups aligned to buckets.
public struct DashboardContext: Sendable {
    public let bucketStarts: [Int64]
    public let duration: Int64
    public let bucket: Int64
    let labeler: TimeLabeler
    /// When faults were in force (from `faults.active`), shaded on every time chart.
    let faultWindows: [TimeChart.Window]

    init(results: RunResults) {
        bucketStarts = results.bucketStarts
        duration = results.scenario.durationNanoseconds
        bucket = results.scenario.bucketNanoseconds
        labeler = TimeLabeler(startTimeOfDay: results.scenario.startTimeOfDay)
        var windows: [TimeChart.Window] = []
        for metric in results.metrics(named: "faults.active") {
            var open: Int64?
            let points = Dictionary((results.series[metric.id] ?? []).map { ($0.bucketStart, $0.value) }, uniquingKeysWith: { a, _ in a })
            for start in results.bucketStarts + [results.scenario.durationNanoseconds] {
                let active = (points[start] ?? 0) > 0
                if active, open == nil { open = start }
                if !active, let from = open {
                    windows.append(TimeChart.Window(name: metric.label("kind") ?? "fault", from: from, to: min(start, duration)))
                    open = nil
                }
            }
        }
        faultWindows = windows
    }

    /// The series of one metric, one value per bucket (0 where nothing was recorded).
    func values(_ results: RunResults, _ metric: MetricDescriptor?) -> [Double] {
        guard let metric else { return bucketStarts.map { _ in 0 } }
        var byStart: [Int64: Double] = [:]
        for point in results.series[metric.id] ?? [] { byStart[point.bucketStart] = point.value }
        return bucketStarts.map { byStart[$0] ?? 0 }
    }

    func timeChart(format: @escaping (Double) -> String) -> TimeChart {
        TimeChart(duration: duration, labeler: labeler, format: format, windows: faultWindows)
    }
}

/// Every panel fleetlab knows, by id.
public enum DashboardPanels {
    public static let all: [any DashboardPanel] = [
        SummaryPanel(), ThresholdsPanel(), BatteryPanel(), PowerStatePanel(), TicksPanel(), AppStatePanel(),
        LifecyclePanel(), NetworkPanel(), ThroughputPanel(), SessionsPanel(), InvariantsPanel(), PopulationsPanel(),
        EventSamplePanel(), ScenarioTextPanel(), WorkflowsPanel(), WorkflowStepsPanel(), WorkflowActivityPanel(),
        WorkflowLatencyPanel(), WorkflowTicksPanel(), SyncLatencyPanel(), SyncCadencePanel(), SyncOutboxPanel(),
        ServerLoadPanel(id: "sync-server", title: "Sync server load", stack: "sync"), SyncCommandsPanel(),
        ChatLatencyPanel(), ChatActivityPanel(), ServerLoadPanel(id: "chat-server", title: "Chat server load", stack: "chat"),
        AgentLatencyPanel(), AgentActivityPanel(), ServerLoadPanel(id: "agent-server", title: "Agent runtime load", stack: "agent"),
        BridgeRequestsPanel(), BridgeOfflinePanel(), ServerLoadPanel(id: "ai-bridge-relay", title: "AI bridge relay load", stack: "bridge"),
        DesktopTurnsPanel(), DesktopActivityPanel(),
        EndpointsPanel(), EnergyPanel(), PushPanel(), LoadPanel(),
    ]

    public static func panel(id: String) -> (any DashboardPanel)? { all.first { $0.id == id } }
}
