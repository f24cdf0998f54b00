import Testing
import LabKernel
import LoadTest
import Simulator

@Suite("Chat groups of a load test")
struct ChatGroupPlanTests {
    func chat(groups: Int, sizes: ClosedRange<Int> = 3...12) -> ChatSettings {
        var chat = ChatSettings()
        chat.groups = groups
        chat.groupSize = sizes
        return chat
    }

    @Test("the scenario's groups in proportion to the run's phones, each of a size the scenario allows, distinct members among the phones, the same for the same seed")
    func proportion() {
        // chat-groups.yaml: 400 groups among 3,000 phones; a load test of 64 phones gets 9.
        let plan = ChatGroupPlan(chat: chat(groups: 400), scenarioPhones: 3_000, phones: 64, seed: StreamSeed(5))
        #expect(plan.groups.count == 9)
        for members in plan.groups {
            #expect((3...12).contains(members.count))
            #expect(Set(members).count == members.count && members.allSatisfy { (0..<64).contains($0) })
        }
        #expect(plan == ChatGroupPlan(chat: chat(groups: 400), scenarioPhones: 3_000, phones: 64, seed: StreamSeed(5)))
        #expect(plan != ChatGroupPlan(chat: chat(groups: 400), scenarioPhones: 3_000, phones: 64, seed: StreamSeed(6)))
        #expect(plan.groupShare == Ratio(numerator: 70, denominator: 100))
        let member = plan.groups[0][1]
        #expect(plan.groups(of: member).contains(0))
    }

    @Test("a few phones still get one group, no larger than the phones; none without groups in the scenario or phones enough for the smallest")
    func edges() {
        let few = ChatGroupPlan(chat: chat(groups: 400), scenarioPhones: 3_000, phones: 4, seed: StreamSeed(1))
        #expect(few.groups.count == 1 && (3...4).contains(few.groups[0].count))
        #expect(ChatGroupPlan(chat: chat(groups: 0), scenarioPhones: 10, phones: 10, seed: StreamSeed(1)).groups.isEmpty)
        #expect(ChatGroupPlan(chat: chat(groups: 5), scenarioPhones: 10, phones: 2, seed: StreamSeed(1)).groups.isEmpty)
        #expect(ChatGroupPlan(chat: nil, scenarioPhones: 10, phones: 10, seed: StreamSeed(1)).groups.isEmpty)
    }
}
