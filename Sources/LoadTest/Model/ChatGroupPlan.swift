public import LabKernel
public import Simulator

/// Which of a load test's chat phones share which groups, decided before the run from the
/// scenario and the seed alone.
///
/// A load-test phone is one user, so the scenario's `chat.groups` is taken in proportion
/// to the run's phones against the scenario's chat phones (as `--devices` scales a
/// simulation's groups), rounded, and at least one when the scenario has groups and the run
/// has phones enough for the smallest. Each group's size is drawn from `chat.groupSize`
/// (at most every phone) and its members without repeats, as the simulator draws its
/// users' groups; the first member creates the group and adds the others. A phone sends to
/// one of its groups with the scenario's `chat.groupShare`, else to its DM partner, and
/// announces a message by `typing.start` with `chat.typingShare`.
public struct ChatGroupPlan: Sendable, Equatable {
    /// Each group's members by phone index; the first one creates it.
    public let groups: [[Int]]
    /// The share of a member's messages that go to one of its groups.
    public let groupShare: Ratio
    /// The share of messages announced by `typing.start`.
    public let typingShare: Ratio

    public init(chat: ChatSettings?, scenarioPhones: Int, phones: Int, seed: StreamSeed) {
        groupShare = chat?.groupShare ?? Ratio(numerator: 0, denominator: 1)
        typingShare = chat?.typingShare ?? Ratio(numerator: 0, denominator: 1)
        guard let chat, chat.groups > 0, phones >= chat.groupSize.lowerBound else {
            groups = []
            return
        }
        let count = max(1, Int((Double(chat.groups) * Double(phones) / Double(max(1, scenarioPhones))).rounded()))
        var draw = seed.generator()
        groups = (0..<count).map { _ in
            let size = min(phones, chat.groupSize.lowerBound + Int(draw.next() % UInt64(chat.groupSize.count)))
            var members: [Int] = []
            while members.count < size {
                let phone = Int(draw.next() % UInt64(phones))
                if !members.contains(phone) { members.append(phone) }
            }
            return members
        }
    }

    /// The groups phone `index` belongs to, by group number.
    public func groups(of index: Int) -> [Int] { groups.indices.filter { groups[$0].contains(index) } }
}
