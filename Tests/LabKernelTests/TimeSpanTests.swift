import Testing
import LabKernel

@Suite("Time spans and instants")
struct TimeSpanTests {
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
