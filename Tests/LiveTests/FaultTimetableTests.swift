import Testing
@testable import Live

@Suite("Fault timetable of fleetlab serve --faults")
struct FaultTimetableTests {
    let timetable = FaultTimetable(windows: [
        .init(server: "chat", start: 10, end: 20, effect: .down),
        .init(server: "chat", start: 15, end: 30, effect: .down),
        .init(server: "mobile-sync", start: 5, end: 25, effect: .slowdown(factor: 4)),
        .init(server: "mobile-sync", start: 20, end: 40, effect: .slowdown(factor: 40)),
    ], period: 60)

    @Test("overlapping outages hold while either lasts; of overlapping slowdowns the slowest wins; other servers are untouched")
    func overlaps() {
        #expect(!timetable.isDown("chat", at: 9.9))
        #expect(timetable.isDown("chat", at: 10) && timetable.isDown("chat", at: 25))
        #expect(!timetable.isDown("chat", at: 30))
        #expect(timetable.slowdown("mobile-sync", at: 4) == nil)
        #expect(timetable.slowdown("mobile-sync", at: 10) == 4)
        #expect(timetable.slowdown("mobile-sync", at: 22) == 40)
        #expect(!timetable.isDown("mobile-sync", at: 22) && timetable.slowdown("chat", at: 22) == nil)
        #expect(!timetable.isDown("agent-runtime", at: 12))
    }

    @Test("a period starts the timetable over; a plan without one plays once")
    func repeats() {
        #expect(timetable.isDown("chat", at: 60 * 7 + 12))
        #expect(!timetable.isDown("chat", at: 60 * 7 + 45))
        #expect(timetable.nextChange(after: 0) == 5)
        #expect(timetable.nextChange(after: 40) == 65, "after the last edge, the next round's first")
        var once = timetable
        once.period = nil
        #expect(!once.isDown("chat", at: 72))
        #expect(once.nextChange(after: 39) == 40 && once.nextChange(after: 40) == nil)
        #expect(!once.isDown("chat", at: -1), "nothing holds before the start")
    }
}
