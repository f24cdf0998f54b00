/// One slice of a fleet, for a run split over processes or machines (`--shard I/N`).
///
/// Shard `I` of `N` runs the members of every population whose number is `I` modulo `N`.
/// A device's streams derive from its population and member number, never from the fleet's
/// size or the shard count, so the shards' devices together are exactly the single run's.
/// What the devices share is not split: each shard runs its own server cores, as a
/// horizontally scaled deployment does (docs/ci.md, "Shards").
public struct FleetShard: Sendable, Equatable, CustomStringConvertible {
    /// 0-based, as Kubernetes' JOB_COMPLETION_INDEX.
    public let index: Int
    public let count: Int

    public init?(index: Int, count: Int) {
        guard count >= 1, count <= 100_000, (0..<count).contains(index) else { return nil }
        self.index = index
        self.count = count
    }

    /// "I/N", e.g. "0/4".
    public init?(parsing text: String) {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, let index = Int(parts[0]), let count = Int(parts[1]) else { return nil }
        self.init(index: index, count: count)
    }

    public func includes(_ member: Int) -> Bool { member % count == index }

    public var description: String { "\(index)/\(count)" }
}
