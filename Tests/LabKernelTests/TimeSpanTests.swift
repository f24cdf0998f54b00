import Testing
import LabKernel

@Suite("Time spans and instants")
struct TimeSpanTests {
    @Test("RFC 3339 text of Unix milliseconds: padded fields, days before 1970, leap days, years past 9999")
    func rfc3339() {
        #expect(RFC3339.format(unixMilliseconds: 0) == "1970-01-01T00:00:00.000Z")
        #expect(RFC3339.format(unixMilliseconds: 951_782_400_007) == "2000-02-29T00:00:00.007Z")
        #expect(RFC3339.format(unixMilliseconds: -1) == "1969-12-31T23:59:59.999Z")
        #expect(RFC3339.format(unixMilliseconds: 1_795_325_445_120) == "2026-11-22T05:30:45.120Z")
        #expect(RFC3339.format(unixMilliseconds: 253_402_300_800_000) == "10000-01-01T00:00:00.000Z")
        for ms: Int64 in [0, 1, 59_999, 86_399_999, 1_795_325_445_120, -62_135_596_800_000] {
            #expect(RFC3339.parse(RFC3339.format(unixMilliseconds: ms)) == ms, "\(ms)")
        }
    }

    @Test("parses every unit and compound spans exactly")
    func parsing() {
        #expect(TimeSpan("250ms") == .milliseconds(250))
        #expect(TimeSpan("6h") == .hours(6))
        #expect(TimeSpan("1h30m") == .minutes(90))
        #expect(TimeSpan("1.5s") == .milliseconds(1_500))
        #expect(TimeSpan("0.1s") == .nanoseconds(100_000_000))
        #expect(TimeSpan("90") == .seconds(90))
        #expect(TimeSpan("2d") == .hours(48))
        #expect(TimeSpan("250us") == .microseconds(250))
        #expect(TimeSpan("7ns") == .nanoseconds(7))
        #expect(TimeSpan(" 5m ") == .minutes(5))
    }

    @Test("rejects malformed spans instead of guessing", arguments: ["", "abc", "5x", "m5", "1.2.3s", "0.0000000001s", "99999999999d", "5 m"])
    func rejects(text: String) {
        #expect(TimeSpan(text) == nil)
    }

    @Test("prints the shortest exact form and parses it back")
    func roundTrip() {
        let spans: [TimeSpan] = [.milliseconds(250), .hours(6), .minutes(90), .milliseconds(1_500), .nanoseconds(7), .days(3) + .seconds(1)]
        for span in spans {
            #expect(TimeSpan(span.description) == span, "\(span)")
        }
        #expect(TimeSpan.minutes(90).description == "1h30m")
        #expect(TimeSpan.milliseconds(1_500).description == "1.5s")
    }

    @Test("instant arithmetic saturates instead of trapping")
    func saturation() {
        let far = Instant.distantFuture + .hours(1)
        #expect(far == .distantFuture)
        #expect((Instant.zero + .seconds(5)) - Instant.zero == .seconds(5))
        #expect(TimeSpan.approximately(seconds: 1e30).nanoseconds == .max)
        #expect(TimeSpan.approximately(seconds: .nan) == .zero)
    }
}

@Suite("Time arithmetic never traps")
struct TimeSaturationTests {
    @Test("constructors and operators saturate at the ends instead of overflowing")
    func saturation() {
        #expect(TimeSpan.milliseconds(999_999_999_999_999).nanoseconds == .max)
        #expect(TimeSpan.seconds(.min).nanoseconds == .min)
        #expect(TimeSpan.days(200_000).nanoseconds == .max)
        #expect((TimeSpan(nanoseconds: .max) + .seconds(1)).nanoseconds == .max)
        #expect((TimeSpan(nanoseconds: .min) - .seconds(1)).nanoseconds == .min)
        #expect((TimeSpan.seconds(1) * .max).nanoseconds == .max && (TimeSpan.seconds(-1) * .max).nanoseconds == .min)
        #expect((TimeSpan(nanoseconds: .min) / -1).nanoseconds == .max)
        #expect((Instant.distantFuture + .days(1)) == .distantFuture)
        #expect((Instant(nanoseconds: .min) - Instant(nanoseconds: 5)).nanoseconds == .min)
        #expect(TimeSpan.minutes(90) == .hours(1) + .minutes(30), "in range nothing changes")
    }

    @Test("wall-clock instants: any parsed date converts, far ones saturate; more than three fraction digits are cut, not a trap")
    func wallClock() {
        let origin = WallClockOrigin.simulationEpoch
        #expect(origin.instant(atUnixMilliseconds: origin.unixMilliseconds + 1_500) == .zero + .milliseconds(1_500))
        let far = RFC3339.parse("9999-01-01T00:00:00Z")!, early = RFC3339.parse("0001-01-01T00:00:00Z")!
        #expect(origin.instant(atUnixMilliseconds: far) == .distantFuture)
        #expect(origin.instant(atUnixMilliseconds: early) == Instant(nanoseconds: .min))
        #expect(origin.instant(atUnixMilliseconds: .max) == .distantFuture && origin.instant(atUnixMilliseconds: .min) == Instant(nanoseconds: .min))
        #expect(RFC3339.parse("1970-01-01T00:00:00.123456789Z") == 123)
        #expect(RFC3339.parse("1970-01-01T00:00:00.5Z") == 500)
        #expect(WallClockOrigin.unixEpoch.unixMilliseconds(at: .distantFuture) == Int64.max / 1_000_000)
    }
}
