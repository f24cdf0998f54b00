import LabKernel

/// The values one label of a metric takes, as an enum whose cases are the label's values
/// in registration order: `metrics.requests[.timeout]` rather than `metrics.requests[2]`.
protocol MetricLabel: CaseIterable, RawRepresentable where RawValue == Int {
    /// The label's value as recorded (`"timeout"`).
    var label: String { get }
}

/// One metric's handles, one per value of a `MetricLabel`, registered in case order.
struct LabelledHandles<Key: MetricLabel> {
    private let handles: [MetricHandle]

    init(_ name: String, label: String, extra: [(String, String)] = [], recorder: inout Recorder) {
        handles = Key.allCases.map { recorder.register(name, labels: extra + [(label, $0.label)]) }
    }

    subscript(key: Key) -> MetricHandle { handles[key.rawValue] }

    var all: [MetricHandle] { handles }
}
