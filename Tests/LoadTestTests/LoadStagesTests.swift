import Testing
import LabKernel
import LoadTest
import Simulator

@Suite("Load stages")
struct LoadStagesTests {
    /// Up to 100 over 30 s, held for a minute, down to none over 30 s.
    let upHoldDown = LoadStages.parse("30s:100,1m:100,30s:0")!.stages

    @Test("stages parse as phones or as rates, never a mix; malformed ones are refused")
    func parsing() throws {
        let phones = try #require(LoadStages.parse("30s:100, 1m:100,30s:0"))
        #expect(!phones.isRate && phones.stages.stages.count == 3 && phones.stages.total == .minutes(2) && phones.stages.peak == 100)
        let rates = try #require(LoadStages.parse("10s:200/s,1m:200/s"))
        #expect(rates.isRate && rates.stages.stages.map(\.target) == [200, 200])
        for bad in ["", "30s", "30s:", "30s:100,", "x:100", "30s:-1", "30s:100,1m:200/s", "30s:1e400", "30s:100:1"] {
            #expect(LoadStages.parse(bad) == nil, "\(bad)")
        }
    }

    @Test("the load moves linearly between the stages' targets and holds after the last")
    func values() {
        #expect(upHoldDown.value(at: 0) == 0 && upHoldDown.value(at: 15) == 50 && upHoldDown.value(at: 30) == 100)
        #expect(upHoldDown.value(at: 60) == 100 && upHoldDown.value(at: 105) == 50 && upHoldDown.value(at: 120) == 0 && upHoldDown.value(at: 500) == 0)
        let jump = LoadStages.parse("0s:10,5s:10")!.stages
        #expect(jump.value(at: 0) == 10 && jump.value(at: 4) == 10)
    }

    @Test("a rate's arrivals are its integral, and the k-th arrival's moment is the inverse")
    func arrivals() {
        let rates = LoadStages.parse("10s:100/s,10s:100/s,10s:0/s")!.stages
        #expect(rates.integral(to: 10) == 500 && rates.integral(to: 20) == 1_500 && rates.integral(to: 30) == 2_000 && rates.integral(to: 40) == 2_000)
        #expect(abs(rates.time(ofIntegral: 500) - 10) < 1e-9 && abs(rates.time(ofIntegral: 1_000) - 15) < 1e-9)
        // Half the ramp-down's 500 arrivals come in its first 10 − 10/√2 seconds.
        #expect(abs(rates.time(ofIntegral: 1_750) - (30 - 10 / 2.0.squareRoot())) < 1e-9)
        #expect(rates.time(ofIntegral: 2_001) == .infinity, "no arrival after the rate fell to zero")
        for k in [1, 7, 499, 501, 1_499, 1_999] { #expect(abs(rates.integral(to: rates.time(ofIntegral: Double(k))) - Double(k)) < 1e-6) }
        // The open model's rate and ramp are the same schedule in one stage.
        let ramped = ArrivalSchedule(rate: 100, ramp: .seconds(10))
        #expect(ramped.arrivals(by: 10) == 500 && ramped.arrivals(by: 12) == 700)
    }

    @Test("phone i's turn comes when the stages call for more than i phones, and ends when they call for i or fewer")
    func turns() {
        // Phone 49 starts halfway up the ramp, runs through the hold, and stops halfway down.
        #expect(upHoldDown.firstAbove(49, atOrAfter: 0) == 14.7)
        #expect(upHoldDown.firstAbove(49, atOrAfter: 50) == 50)
        #expect(upHoldDown.value(at: 105.5) < 50 && upHoldDown.firstAbove(49, atOrAfter: 105.5) == nil, "ramped down: its turn does not come again")
        #expect(upHoldDown.firstAbove(100, atOrAfter: 0) == nil, "phone 100 of 100 never runs")
        let again = LoadStages.parse("10s:10,10s:0,10s:10")!.stages
        #expect(again.firstAbove(4, atOrAfter: 16) == 24, "down and up again: phone 4 returns when the load passes 4 once more")
    }
}

@Suite("Load-test shards")
struct LoadShardTests {
    let shards = (0..<4).map { FleetShard(index: $0, count: 4)! }

    @Test("the shards' slices of a workload add up to it: phones split, every N-th phone of the stages, the arrival rate divided")
    func slices() throws {
        let closed = WorkloadModel.closed(devices: 50, thinkTime: .seconds(1))
        #expect(shards.map { closed.slice($0).devices } == [12, 13, 12, 13])
        let stages = try #require(LoadStages.parse("10s:10,10s:10,10s:0")).stages
        let staged = WorkloadModel.staged(stages, thinkTime: .seconds(1))
        #expect(shards.map { staged.slice($0).devices } == [3, 3, 2, 2], "phones 0-9: 0,4,8 / 1,5,9 / 2,6 / 3,7")
        #expect(staged.slice(shards[1]).phoneNumber(2) == 9 && staged.phoneNumber(2) == 2)
        // At every moment the shards' phones whose turn it is add up to the whole run's.
        for t in stride(from: 0.0, through: 30, by: 0.7) {
            let whole = staged.load(at: t).phones ?? -1
            #expect(shards.reduce(0.0) { $0 + (staged.slice($1).load(at: t).phones ?? 0) } == whole, "at \(t) s")
        }
        let open = WorkloadModel.open(ArrivalSchedule(rate: 200, ramp: .seconds(10)), devices: 50, maxWait: .seconds(5))
        guard case .open(let schedule, let pool, _) = open.slice(shards[2]) else { Issue.record("not open"); return }
        #expect(schedule.arrivals(by: 20) == 750 && pool == 12, "a quarter of 3,000 arrivals by 20 s")
    }
}
