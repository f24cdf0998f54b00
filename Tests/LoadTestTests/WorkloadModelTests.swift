import Testing
import LabKernel
@testable import LoadTest

@Suite("Workload models")
struct WorkloadModelTests {
    @Test("a constant rate spaces arrivals evenly: 200/s puts the 200th at 1 s")
    func constantRate() {
        let schedule = ArrivalSchedule(rate: 200, ramp: .zero)
        #expect(schedule.offset(ofArrival: 1) == 0.005)
        #expect(abs(schedule.offset(ofArrival: 200) - 1) < 1e-12)
        #expect(schedule.arrivals(by: 2.5) == 500)
    }

    @Test("a ramp grows the rate linearly: half the full rate's arrivals over the ramp, then the full rate")
    func ramp() {
        let schedule = ArrivalSchedule(rate: 100, ramp: .seconds(10))
        #expect(schedule.arrivals(by: 10) == 500)
        #expect(schedule.arrivals(by: 5) == 125)
        #expect(schedule.arrivals(by: 12) == 700)
        var previous = 0.0
        for k in 1...2_000 {
            let t = schedule.offset(ofArrival: k)
            #expect(t > previous, "arrival \(k)")
            #expect(abs(schedule.arrivals(by: t) - Double(k)) < 1e-6, "offset is the inverse of arrivals at \(k)")
            previous = t
        }
    }

    @Test("think times stay within half and one and a half of the mean, average to it, and repeat per seed")
    func thinkTimes() {
        var a = ThinkTime(mean: .seconds(1), seed: StreamSeed(3)), b = ThinkTime(mean: .seconds(1), seed: StreamSeed(3))
        var total: Int64 = 0
        for _ in 0..<10_000 {
            let t = a.next()
            #expect(t.nanoseconds >= 500_000_000 && t.nanoseconds <= 1_500_000_000)
            #expect(t == b.next())
            total += t.nanoseconds
        }
        #expect(abs(Double(total) / 10_000 / 1e9 - 1) < 0.02)
    }
}
