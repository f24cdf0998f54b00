import Foundation
import Testing
import LabKernel

@Suite("Timer tables, power states and JSON values")
struct KernelValueTests {
    enum Timer: Hashable, Sendable { case retry, heartbeat, timeout }

    @Test("32 bytes as a value: the same bytes back, base64 in and out as the keys' texts, nothing but 32 bytes accepted")
    func bytes32() throws {
        let bytes = (0..<32).map { UInt8($0 * 7 + 1) }
        let value = try #require(Bytes32(bytes))
        #expect(value.bytes == bytes && Bytes32(hex: value.hex) == value && value.hex == bytes.hexString)
        #expect(Bytes32(Array(bytes.dropLast())) == nil && Bytes32(bytes + [0]) == nil && Bytes32(hex: "00") == nil)
        #expect(value < Bytes32([2] + Array(bytes.dropFirst()))!, "byte order")
        let coded = try JSONEncoder().encode([value])
        #expect(String(decoding: coded, as: UTF8.self) == "[\"\(Base64.encode(bytes).replacingOccurrences(of: "/", with: "\\/"))\"]")
        #expect(try JSONDecoder().decode([Bytes32].self, from: coded) == [value])
        #expect(throws: DecodingError.self) { try JSONDecoder().decode([Bytes32].self, from: Data("[\"AAAA\"]".utf8)) }
    }

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
