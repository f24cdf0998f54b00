import Testing
import LoadTest

@Suite("Load test recorder")
struct LoadRecorderTests {
    @Test("the progress line's p99 is of the requests since it was last drawn, whenever a results bucket closed")
    func progressWindow() throws {
        let recorder = LoadRecorder()
        for ms in 1...100 { recorder.request("POST /api/v1/mobile/sync", latency: .milliseconds(ms), failure: ms == 100 ? "HTTP 503" : nil) }
        // A one-second bucket closes just before the line is drawn, as the ticker does.
        _ = recorder.closeBucket(startingAt: 0, cpuPercent: 3)
        let first = recorder.takeProgress()
        #expect(first.requests == 100 && first.errors == 1)
        let p99 = Double(try #require(first.p99)) / 1e6
        #expect(abs(p99 - 99) < 1, "p99 \(p99) ms")
        let quiet = recorder.takeProgress()
        #expect(quiet.requests == 100 && quiet.p99 == nil, "nothing answered since: no p99, not zero")
    }
}

@Suite("Load run identity")
struct LoadRunTagTests {
    @Test("runs started in the same millisecond get tags of their own, so their tenants, devices and users never collide on a server")
    func sameMillisecond() {
        let tags = (0..<50).map { _ in LoadRun.runTag(startingAt: 1_795_000_000_123) }
        #expect(Set(tags).count == 50)
        #expect(tags.allSatisfy { $0.hasPrefix(String(UInt64(1_795_000_000_123), radix: 36)) && $0.count == 8 + 6 })
    }
}
