import Testing
import LabKernel

@Suite("Timer tables, power states and JSON values")
struct KernelValueTests {
    enum Timer: Hashable, Sendable { case retry, heartbeat, timeout }

    @Test("a timer table keeps one deadline per timer and fires due timers earliest first")
    func timerTable() {
        var timers = TimerTable<Timer>()
        #expect(timers.nextDeadline == nil)
        timers.arm(.heartbeat, at: Instant(nanoseconds: 30))
        timers.arm(.retry, at: Instant(nanoseconds: 10))
        timers.arm(.timeout, at: Instant(nanoseconds: 10))
        timers.arm(.heartbeat, at: Instant(nanoseconds: 20))  // re-arming replaces
        #expect(timers.nextDeadline == Instant(nanoseconds: 10))
        #expect(timers.popExpired(now: Instant(nanoseconds: 9)) == [])
        #expect(timers.popExpired(now: Instant(nanoseconds: 20)) == [.retry, .timeout, .heartbeat])
        #expect(timers.isEmpty)
        timers.arm(.retry, at: Instant(nanoseconds: 50))
        timers.cancel(.retry)
        #expect(timers.nextDeadline == nil)
    }

    @Test("power states follow the orch8 thresholds and multipliers")
    func powerStates() {
        let percent: Int64 = 1_000_000
        #expect(PowerState.unpluggedState(levelMicroPercent: 100 * percent) == .unplugged)
        #expect(PowerState.unpluggedState(levelMicroPercent: 20 * percent + 1) == .unplugged)
        #expect(PowerState.unpluggedState(levelMicroPercent: 20 * percent) == .lowBattery)
        #expect(PowerState.unpluggedState(levelMicroPercent: 5 * percent) == .lowBattery)
        #expect(PowerState.unpluggedState(levelMicroPercent: 5 * percent - 1) == .criticalBattery)
        #expect(PowerState.allCases.map(\.tickMultiplier) == [1, 1, 2, 4])
        #expect(PowerState.allCases.map(\.description) == ["Charging", "Unplugged", "LowBattery", "CriticalBattery"])
    }

    @Test("JSON values serialise canonically with sorted keys and escapes")
    func json() {
        let value: JSONValue = ["b": [1, 2.5, true, nil], "a": "quote \" slash \\ line\n\u{01}"]
        #expect(value.canonicalText == #"{"a":"quote \" slash \\ line\n\u0001","b":[1,2.5,true,null]}"#)
        #expect(JSONValue.number(-0.0).canonicalText == "0")
        #expect(JSONValue.number(1e300).canonicalText == "1e+300")
    }
}
