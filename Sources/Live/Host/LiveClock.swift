import Foundation
import Synchronization
public import LabKernel

/// Real time for the sans-I/O cores a live driver runs.
///
/// `now` is the wall clock as nanoseconds since the Unix epoch (`origin` is the epoch), so
/// an instant a server or device stores (a message's time, a token's expiry, an
/// instance's deadline) still means the same moment after a restart over the same data.
/// A clock stepped backwards never makes `now` go back: cores compare instants and expect
/// them not to decrease.
public final class LiveClock: Sendable {
    public let origin = WallClockOrigin.unixEpoch
    private let last = Mutex<Int64>(0)

    public init() {}

    public var now: Instant {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        let wall = Int64(time.tv_sec) * 1_000_000_000 + Int64(time.tv_nsec)
        return Instant(nanoseconds: last.withLock { latest in
            latest = max(latest, wall)
            return latest
        })
    }
}
