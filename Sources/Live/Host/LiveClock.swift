import Foundation
public import LabKernel

/// Real time for the sans-I/O cores a live driver runs: `now` is the monotonic time since
/// the driver started (the cores' `Instant`), `origin` the wall time at that start (for
/// the RFC 3339 stamps the cores write).
public struct LiveClock: Sendable {
    let start = ContinuousClock.now
    public let origin: WallClockOrigin

    public init() {
        origin = WallClockOrigin(unixMilliseconds: Int64(Date().timeIntervalSince1970 * 1000))
    }

    public var now: Instant {
        let elapsed = ContinuousClock.now - start
        return Instant(nanoseconds: elapsed.components.seconds * 1_000_000_000 + elapsed.components.attoseconds / 1_000_000_000)
    }
}
