import Foundation

/// When `fleetlab serve --faults` takes a server down or slows it, as seconds from the
/// start of `serve`, starting over every `period` when one is set.
///
/// A value that answers "what holds now?" for an offset the caller reads from its clock:
/// the supervisor asks it which servers should be down, a worker how slow it should be.
/// Overlapping windows hold while any is in force, as overlapping faults do in the
/// simulator; of overlapping slowdowns the slowest wins, of error shares the largest.
public struct FaultTimetable: Sendable, Hashable {
    public enum Effect: Sendable, Hashable {
        /// The server's process is killed, and nothing listens on its port, until the end.
        case down
        /// Each request is held `factor − 1` service times longer than it takes.
        case slowdown(factor: Double)
        /// This share of requests (0...1) is answered 503 at once.
        case errors(share: Double)
    }

    public struct Window: Sendable, Hashable {
        /// The server's name in `fleetlab serve` (`mobile-sync`, `chat`, …).
        public var server: String
        public var start: Double
        public var end: Double
        public var effect: Effect

        public init(server: String, start: Double, end: Double, effect: Effect) {
            self.server = server
            self.start = start
            self.end = end
            self.effect = effect
        }
    }

    public var windows: [Window]
    /// Seconds after which the timetable starts over; nil: it plays once.
    public var period: Double?

    public init(windows: [Window], period: Double? = nil) {
        self.windows = windows
        self.period = period
    }

    /// The windows in force `offset` seconds after the start.
    func inForce(_ server: String, at offset: Double) -> [Window] {
        guard offset >= 0 else { return [] }
        let t = period.map { offset.truncatingRemainder(dividingBy: $0) } ?? offset
        return windows.filter { $0.server == server && $0.start <= t && t < $0.end }
    }

    public func isDown(_ server: String, at offset: Double) -> Bool {
        inForce(server, at: offset).contains { $0.effect == .down }
    }

    /// The slowest slowdown of `server` in force, or nil.
    public func slowdown(_ server: String, at offset: Double) -> Double? {
        inForce(server, at: offset).compactMap { if case .slowdown(let factor) = $0.effect { factor } else { nil } }.max()
    }

    /// The largest share of errors of `server` in force, or nil.
    public func errorShare(_ server: String, at offset: Double) -> Double? {
        inForce(server, at: offset).compactMap { if case .errors(let share) = $0.effect { share } else { nil } }.max()
    }

    /// The first moment after `offset` at which a window opens or closes, for a player
    /// to sleep until; nil when nothing changes any more.
    public func nextChange(after offset: Double) -> Double? {
        let edges = windows.flatMap { [$0.start, $0.end] }
        guard let period else { return edges.filter { $0 > offset }.min() }
        let round = (offset / period).rounded(.down) * period
        return (edges.map { round + $0 } + edges.map { round + period + $0 }).filter { $0 > offset }.min()
    }
}
