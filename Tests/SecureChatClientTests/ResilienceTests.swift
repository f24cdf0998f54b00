import Testing
import ChatCrypto
import LabCrypto
import LabKernel
@testable import SecureChatClient
@testable import SecureChatServer

/// The client never wedges: refreshes that fail in transit or with 429/5xx are retried
/// with a capped backoff, only a 401 logs out, and every request has a deadline.
@Suite("Chat client: no wedge, no needless logout")
struct ResilienceTests {
    @Test("a refresh lost in transit is retried after a backoff; the parked send then goes through")
    func refreshLostInTransit() {
        var (net, dm) = ChatNetwork.pair()
        net.now = net.now + .minutes(16)  // the access token has expired
        net.faults = [.init(who: "alice", path: "/auth/refresh", kind: .transport, times: 1)]
        net.run("alice", .send(channelID: dm, text: "through a flaky refresh"))
        #expect(net.clients["alice"]!.isSignedIn && net.loggedOut["alice"] == nil)
        #expect(net.texts("bob", dm).isEmpty && net.clients["alice"]!.nextDeadline != nil, "waiting with a deadline, not forever")
        net.advance(.seconds(3))
        #expect(net.texts("bob", dm) == ["through a flaky refresh"])
        #expect(net.clients["alice"]!.stats.refreshes == 2 && net.clients["alice"]!.stats.refreshRetries == 1)
    }

    @Test("requests in flight together when the access token expired: one refresh, and a 401 that comes back after it goes again with the new token, not into a second refresh")
    func unauthorizedAfterTheRefresh() {
        var exchange = OneByOne.aliceWithTwoChannels()
        exchange.net.now = exchange.net.now + .minutes(16)  // every access token has expired
        // A client that does not know when its token expires (a server that sends no
        // `expires_in`) learns it from the 401s.
        exchange.alice.snapshot.accessTokenStaleAt = nil
        // A push's background window: both channels' pages go out at once, on the old token.
        let pages = exchange.catchUp()
        #expect(pages.count == 2 && pages.allSatisfy { $0.request.path.hasSuffix("/messages") })
        let refresh = exchange.answer(pages[0])
        #expect(refresh.map(\.request.path) == ["/api/v1/auth/refresh"])
        let retried = exchange.answer(refresh[0])
        #expect(retried.map(\.request.path) == [pages[0].request.path])
        // The second page's 401 comes back only now, after the refresh finished.
        let again = exchange.answer(pages[1])
        #expect(again.map(\.request.path) == [pages[1].request.path], "sent again with the new token, no second refresh")
        for flight in retried + again { #expect(exchange.answer(flight).isEmpty) }
        #expect(exchange.statuses == [401, 200, 401, 200, 200])
        #expect(exchange.alice.isSignedIn && exchange.alice.stats.refreshes == 1)
    }

    @Test("a request on an access token known to be stale waits for a refresh instead of going out to a 401; a fresh one goes at once")
    func staleTokenRefreshesFirst() {
        var exchange = OneByOne.aliceWithTwoChannels()
        // Thirteen minutes into the token's fifteen: the pages go out on it.
        exchange.net.now = exchange.net.now + .minutes(13)
        let fresh = exchange.catchUp()
        #expect(fresh.count == 2 && fresh.allSatisfy { $0.request.path.hasSuffix("/messages") })
        for flight in fresh { #expect(exchange.answer(flight).isEmpty) }
        // Fourteen and a half: within the last minute, so the refresh goes first, once.
        exchange.net.now = exchange.net.now + .seconds(90)
        let first = exchange.catchUp()
        #expect(first.map(\.request.path) == ["/api/v1/auth/refresh"])
        let pages = exchange.answer(first[0])
        #expect(pages.count == 2 && pages.allSatisfy { $0.request.path.hasSuffix("/messages") })
        for flight in pages { #expect(exchange.answer(flight).isEmpty) }
        #expect(exchange.statuses == [200, 200, 200, 200, 200], "no request was answered 401")
        #expect(exchange.alice.isSignedIn && exchange.alice.stats.refreshes == 1)
        // The new token's lifetime starts at the refresh's answer.
        #expect(exchange.alice.snapshot.accessTokenStaleAt == exchange.net.now + .minutes(14))
    }

    @Test("429 and 5xx answers to a refresh back off (Retry-After honoured) and never log out; only a 401 does")
    func refreshErrorsRetry() {
        var (net, dm) = ChatNetwork.pair()
        net.now = net.now + .minutes(16)
        net.faults = [.init(who: "alice", path: "/auth/refresh", kind: .status(429, retryAfter: 20), times: 1),
                      .init(who: "alice", path: "/auth/refresh", kind: .status(503, retryAfter: nil), times: 2)]
        net.run("alice", .send(channelID: dm, text: "patience"))
        net.advance(.seconds(19))
        #expect(net.clients["alice"]!.stats.refreshes == 1, "Retry-After: 20 is honoured")
        net.advance(.seconds(20))
        #expect(net.loggedOut["alice"] == nil && net.clients["alice"]!.isSignedIn)
        net.advance(.seconds(20))
        #expect(net.texts("bob", dm) == ["patience"] && net.clients["alice"]!.stats.refreshes == 4)
        // A 401 to the refresh is the one answer that ends the session.
        net.now = net.now + .minutes(16)
        net.faults = [.init(who: "alice", path: "/auth/refresh", kind: .status(401, retryAfter: nil), times: 1)]
        net.run("alice", .send(channelID: dm, text: "never"))
        #expect(net.loggedOut["alice"] != nil && !net.clients["alice"]!.isSignedIn)
    }

    @Test("a request whose answer never comes fails at its deadline and is retried: the send goes through once")
    func blackholedRequest() {
        var (net, dm) = ChatNetwork.pair()
        net.faults = [.init(who: "alice", path: "/messages", kind: .blackhole, times: 1)]
        net.run("alice", .send(channelID: dm, text: "into the void, then out"))
        #expect(net.texts("bob", dm).isEmpty)
        net.advance(.seconds(29))
        #expect(net.texts("bob", dm).isEmpty)
        net.advance(.seconds(5))
        #expect(net.texts("bob", dm) == ["into the void, then out"] && net.clients["alice"]!.stats.timeouts == 1)
        // Black-holed reconnects time out too: the socket comes back.
        net.faults = [.init(who: "bob", path: "/auth/ws-ticket", kind: .blackhole, times: 1)]
        net.goOffline("bob")
        net.offline.remove("bob")
        net.advance(.seconds(120))
        #expect(net.clients["bob"]!.isConnected)
    }

    @Test("requests parked behind a failing refresh give up after the park limit; the client stays signed in and recovers")
    func parkedRequestsGiveUp() {
        var (net, dm) = ChatNetwork.pair()
        net.now = net.now + .minutes(16)
        net.faults = [.init(who: "alice", path: "/auth/refresh", kind: .status(503, retryAfter: nil), times: 100)]
        net.run("alice", .send(channelID: dm, text: "eventually"))
        net.advance(.minutes(3))
        #expect(net.clients["alice"]!.stats.timeouts >= 1, "the parked request gave up at its limit (the send, still queued, asks again)")
        #expect((5...9).contains(net.clients["alice"]!.stats.refreshes), "backing off: 1, 2, 4 … 60 s, not a busy loop")
        #expect(net.clients["alice"]!.isSignedIn && net.clients["alice"]!.snapshot.pending.count == 1, "the message waits in the queue, not lost")
        net.faults = []
        net.advance(.minutes(2))
        #expect(net.texts("bob", dm) == ["eventually"])
    }
}

/// Alice (with a DM and a group) and the server, one request at a time: the test chooses
/// the order in which the server answers what her client sent.
struct OneByOne {
    var net: ChatNetwork
    var alice: ChatClient
    /// The server's answers so far, in order.
    var statuses: [Int] = []

    static func aliceWithTwoChannels() -> OneByOne {
        var net = ChatNetwork()
        for name in ["alice", "bob"] { net.register(name, username: name) }
        net.run("alice", .openDM(userID: net.userID("bob")))
        net.run("alice", .createGroup(name: "team"))
        return OneByOne(net: net, alice: net.clients["alice"]!)
    }

    /// A push's background window: the requests the client sends for it.
    mutating func catchUp() -> [(id: Int, request: HTTPRequestMessage)] { ChatNetwork.requests(alice.handle(.catchUp, now: net.now)) }

    /// The server answers one request now; returns what the client sends next.
    mutating func answer(_ flight: (id: Int, request: HTTPRequestMessage)) -> [(id: Int, request: HTTPRequestMessage)] {
        let response = net.server.handle(flight.request, now: net.now).response
        statuses.append(response.status)
        return ChatNetwork.requests(alice.handle(.response(id: flight.id, response), now: net.now))
    }
}
