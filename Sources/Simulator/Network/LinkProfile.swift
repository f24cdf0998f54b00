public import LabKernel

/// How a message fares on one endpoint's access link (Wi-Fi, cellular, a data centre).
///
/// A message from A to B crosses A's uplink and B's downlink: its one-way latency is the
/// sum of a sample from each profile, and it is lost or duplicated if either link says
/// so. That composes cleanly for device-to-server and device-to-device traffic without a
/// table of every pair.
public struct LinkProfile: Hashable, Sendable {
    /// One-way latency contributed by this link, in seconds.
    public var latency: Distribution
    public var loss: Ratio
    public var duplication: Ratio

    public init(latency: Distribution, loss: Ratio = .zero, duplication: Ratio = .zero) {
        self.latency = latency
        self.loss = loss
        self.duplication = duplication
    }

    public static let wifi = LinkProfile(latency: .lognormal(median: 0.012, sigma: 0.5), loss: Ratio(numerator: 1, denominator: 1_000))
    public static let cellular = LinkProfile(latency: .lognormal(median: 0.045, sigma: 0.6), loss: Ratio(numerator: 5, denominator: 1_000))
    public static let datacenter = LinkProfile(latency: .constant(0.0005))
}

/// The kind of access an endpoint has right now.
public enum AccessKind: UInt8, CaseIterable, Sendable, Hashable, CustomStringConvertible {
    case wifi = 0
    case cellular = 1
    case datacenter = 2

    public var description: String {
        switch self {
        case .wifi: return "wifi"
        case .cellular: return "cellular"
        case .datacenter: return "datacenter"
        }
    }
}
