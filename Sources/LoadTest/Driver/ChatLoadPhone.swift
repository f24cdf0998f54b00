import Foundation
import LabKernel
import Live
import SecureChatClient
import Synchronization

/// A virtual phone of a load test on the chat server (d3chat): the end-to-end encrypted
/// chat client core the simulator runs, on real sockets (`LiveChatPhone`). Phones come in
/// pairs (`partner`) for DMs and share groups (`ChatGroupPlan`): before the run each
/// registers a user of its own (keys, one-time pre-keys, its socket), then the DMs are
/// opened and each group's first member creates it and adds the others (`openChannels`).
/// An iteration sends one message: to one of the phone's groups with the scenario's
/// `groupShare`, else to its partner, announced by `typing.start` with the scenario's
/// `typingShare`. It ends when every reader's phone has
/// decrypted it (`chat.delivery_latency{kind=dm|group}`, one observation per reader, from
/// the step's start) or after the chat deadline (failed). Every HTTP exchange is recorded
/// by route.
///
/// App kills (`relaunchShare`): after an iteration the phone's app is killed with that
/// chance. It keeps only what the client stored (`ChatClient.Snapshot`), hears nothing
/// while it is away, and its next iteration launches it again: the session restored
/// (`.start`: who am I, a socket ticket, the socket, the channel list, catch-up pages per
/// channel) and caught up before it sends. A message sent to a phone that is away is not
/// waited for; it is recorded when the phone decrypts it after its relaunch, from the
/// send, as the simulator records a message that reaches a phone whose app was not running.
final class ChatLoadPhone: Sendable {
    let index: Int
    let phone: LiveChatPhone
    let username: String
    let state: Progress
    let board: DeliveryBoard
    let deadline: Duration
    let relaunchShare: Ratio
    let recorder: LoadRecorder

    init(index: Int, base: String, runTag: String, seed: StreamSeed, http: HTTPClient, requestTimeout: Duration, board: DeliveryBoard,
         recorder: LoadRecorder, relaunchShare: Ratio = .zero) throws {
        self.index = index
        self.board = board
        self.relaunchShare = relaunchShare
        self.recorder = recorder
        state = Progress(kinds: seed.child("kinds").generator())
        deadline = requestTimeout * 3
        username = "loadtest-\(runTag)-\(index)"
        phone = try LiveChatPhone(base: base, client: ChatClient(snapshot: ChatClient.Snapshot(seed: seed)), http: http,
                                  requestTimeout: requestTimeout, failing: Self.failing, exchanged: { request, took, failure in
            recorder.request(request.route, stack: "chat", latency: took, failure: failure)
        })
        // What the core tells the app: the messages it decrypted, others typing, refusals.
        Task { [phone, state, board, index, recorder] in
            for await effect in phone.effects {
                switch effect {
                case .delivered(let message): board.arrived(message.text, at: index)
                case .typing(_, _, let active): if active { recorder.typingHeard() }
                case .surfaced(.requestFailed), .loggedOut:
                    // Before the socket is up this ends the registration (a refused sign-up).
                    state.refused.withLock { $0 = true }
                case .request, .openSocket, .socketSend, .closeSocket, .channelAdded, .channelRemoved, .invited, .presence, .historyLoaded, .surfaced:
                    break
                }
            }
        }
    }

    /// A 5xx or a 429, and any 4xx refusing the sign-up: without an account the phone
    /// cannot go on, and a target that is not a chat server answers so. Other 4xx are the
    /// client's to handle (a partner's keys not there yet, say).
    static let failing: @Sendable (HTTPRequestMessage, Int) -> Bool = { request, status in
        status >= 500 || status == 429 || (status >= 400 && request.path.hasSuffix("/auth/register"))
    }

    /// Registers this phone's user and waits until its socket is open; false when the
    /// server refused or the deadline passed.
    func register(clock: ContinuousClock) async -> Bool {
        var password = StreamSeed(UInt64(index)).child(username).generator()
        await phone.feed(.register(username: username, password: "pw-\(password.next())-\(password.next())", deviceName: "loadtest phone \(index)"))
        return await poll(until: clock.now + deadline, clock: clock) { () async -> Bool? in
            if state.refused.withLock({ $0 }) { return false }
            let (connected, id) = await (phone.client.isConnected, phone.client.snapshot.userID)
            guard connected, let id else { return nil }
            state.userID.withLock { $0 = id }
            return true
        } ?? false
    }

    /// Asks `check` every `interval` until it has an answer, or nil once `until` has passed
    /// or the task is cancelled (a Ctrl-C during the set-up): how the set-up and a relaunch
    /// wait for the client core to get somewhere.
    func poll<T>(until: ContinuousClock.Instant, every interval: Duration = .milliseconds(20), clock: ContinuousClock,
                 _ check: () async -> T?) async -> T? {
        while true {
            if let answer = await check() { return answer }
            guard clock.now < until, !Task.isCancelled else { return nil }
            try? await clock.sleep(for: interval)
        }
    }

    /// The id of the channel of this phone's that `match` picks, once its client holds it
    /// (nil after the deadline).
    func channel(until: ContinuousClock.Instant, clock: ContinuousClock, _ match: @escaping @Sendable (ChatClient.ChannelInfo) -> Bool) async -> String? {
        await poll(until: until, clock: clock) { await phone.client.snapshot.channels.values.first(where: match)?.id }
    }

    /// The phone whose DM partner phone `index` is, of `count`: 0 and 1, 2 and 3, …; an odd
    /// last phone writes to phone 0.
    static func partner(of index: Int, count: Int) -> Int { index ^ 1 < count ? index ^ 1 : 0 }

    /// Opens the DMs and forms the plan's groups among the registered phones before the
    /// run. Each pair's lower phone opens their DM and both note it as the one DM they
    /// hold; an odd last phone opens its DM with phone 0 after that, so phone 0 knows which
    /// of its two DMs is its partner's. Each group's first member creates it and adds the
    /// others; a member takes part once its client holds the group. Requests are recorded
    /// like any; a channel not in place within the deadline is left out (the iterations
    /// that would use it fail).
    static func openChannels(_ plan: ChatGroupPlan, phones: [ChatLoadPhone], runTag: String, clock: ContinuousClock) async {
        let partners = phones.indices.map { partner(of: $0, count: phones.count) }
        // A pair is two phones each the other's partner; the odd one's partner has another.
        await withDiscardingTaskGroup { tasks in
            for index in phones.indices where partners[partners[index]] == index && index < partners[index] {
                tasks.addTask { await phones[index].openDM(with: phones[partners[index]], clock: clock) }
            }
        }
        for index in phones.indices where partners[partners[index]] != index {
            await phones[index].openDM(with: phones[partners[index]], clock: clock, partnerNotes: false)
        }
        await formGroups(plan, phones: phones, runTag: runTag, clock: clock)
    }

    /// Opens this phone's DM with `partner` and notes it on both (on the partner unless
    /// `partnerNotes` is false: it holds its own DM already). Each holds no other DM yet.
    func openDM(with partner: ChatLoadPhone, clock: ContinuousClock, partnerNotes: Bool = true) async {
        guard let partnerID = partner.state.userID.withLock({ $0 }), state.userID.withLock({ $0 }) != nil else { return }
        await phone.feed(.openDM(userID: partnerID))
        let until = clock.now + deadline
        guard let dm = await channel(until: until, clock: clock, { $0.isDM }) else { return }
        state.channel.withLock { $0 = dm }
        if partnerNotes, await partner.channel(until: until, clock: clock, { $0.id == dm }) != nil { partner.state.channel.withLock { $0 = dm } }
    }

    /// Forms the plan's groups (`openChannels`).
    static func formGroups(_ plan: ChatGroupPlan, phones: [ChatLoadPhone], runTag: String, clock: ContinuousClock) async {
        await withDiscardingTaskGroup { tasks in
            for (number, members) in plan.groups.enumerated() {
                tasks.addTask {
                    let creator = phones[members[0]]
                    guard creator.state.userID.withLock({ $0 }) != nil else { return }
                    let name = "loadtest-\(runTag)-group-\(number)"
                    await creator.phone.feed(.createGroup(name: name))
                    let until = clock.now + creator.deadline
                    guard let id = await creator.channel(until: until, clock: clock, { $0.name == name }) else { return }
                    creator.state.groups.withLock { $0[number] = id }
                    for member in members.dropFirst() {
                        guard let userID = phones[member].state.userID.withLock({ $0 }) else { continue }
                        await creator.phone.feed(.addMember(channelID: id, userID: userID))
                    }
                    for member in members.dropFirst() where phones[member].state.userID.withLock({ $0 }) != nil {
                        if await phones[member].channel(until: until, clock: clock, { $0.id == id }) != nil {
                            phones[member].state.groups.withLock { $0[number] = id }
                        }
                    }
                }
            }
        }
    }

    /// One iteration meant to start at `intended`: a message to one of this phone's groups
    /// (with the plan's share) or to `partner`, waiting until every reader's phone has
    /// decrypted it. The channels were opened before the run (`openChannels`); a phone
    /// whose registration failed, or whose DM is not in place, fails the iteration.
    func iterate(partner: ChatLoadPhone, phones: [ChatLoadPhone], plan: ChatGroupPlan, intended: ContinuousClock.Instant, clock: ContinuousClock) async -> Bool {
        guard state.userID.withLock({ $0 }) != nil else { return false }
        if state.away.withLock({ $0 }) {
            guard await relaunch(clock: clock) else { return false }
        }
        let delivered = await send(partner: partner, phones: phones, plan: plan, intended: intended, clock: clock)
        if relaunchShare.numerator > 0 && state.kinds.withLock({ $0.chance(relaunchShare) }) { await kill() }
        return delivered
    }

    /// The iteration's message (`iterate`).
    private func send(partner: ChatLoadPhone, phones: [ChatLoadPhone], plan: ChatGroupPlan, intended: ContinuousClock.Instant,
                      clock: ContinuousClock) async -> Bool {
        let groups = state.groups.withLock { $0 }
        let toGroup = !groups.isEmpty && state.kinds.withLock { $0.chance(plan.groupShare) }
        let channel: String, readers: [ChatLoadPhone]
        if toGroup {
            let numbers = groups.keys.sorted()
            let number = numbers[Int(state.kinds.withLock { $0.next() } % UInt64(numbers.count))]
            channel = groups[number]!
            readers = plan.groups[number].filter { $0 != index && phones[$0].state.groups.withLock { $0[number] != nil } }.map { phones[$0] }
        } else {
            guard let dm = state.channel.withLock({ $0 }) else { return false }
            (channel, readers) = (dm, [partner])
        }
        let number = state.sent.withLock { count in
            count += 1
            return count
        }
        let text = "\(username) message \(number)"
        let kind = toGroup ? "group" : "dm"
        let awaited = readers.compactMap { board.expect(text, at: $0.index, sentAt: intended, kind: kind) }
        // Announced by `typing.start` as often as the scenario's users do (the server fans
        // it out to the channel's other members), as the simulator's users do.
        if state.kinds.withLock({ $0.chance(plan.typingShare) }) { await phone.feed(.typing(channelID: channel, started: true)) }
        await phone.feed(.send(channelID: channel, text: text))
        let until = clock.now + deadline
        var everyone = true
        for key in awaited {
            switch await board.wait(key, until: until, clock: clock) {
            case .arrived(let arrival): recorder.chatDelivered(arrival - intended, kind: kind)
            case .readerAway: break  // recorded when that phone decrypts it after its relaunch
            case .late: everyone = false
            }
        }
        return everyone
    }

    /// The app is killed: the client's memory goes, its socket drops, what it stored stays.
    func kill() async {
        state.away.withLock { $0 = true }
        board.away(index)
        await phone.restart { ChatClient(snapshot: $0.snapshot) }
    }

    /// The app is launched again: the session restored from what the client stored, its
    /// socket open, its channels caught up (`loadtest.chat_relaunch`: from the launch until
    /// then). False when that takes longer than the chat deadline.
    func relaunch(clock: ContinuousClock) async -> Bool {
        let began = clock.now
        await phone.feed(.start)
        guard await poll(until: began + deadline, every: .milliseconds(5), clock: clock, { await phone.client.isSettled ? () : nil }) != nil else { return false }
        state.away.withLock { $0 = false }
        board.back(index)
        recorder.relaunched(clock.now - began, stack: "chat")
        return true
    }
}

extension ChatLoadPhone {
    /// How far the phone is: the user id the server gave it once registered, its DM, the
    /// messages it sent.
    final class Progress: Sendable {
        let userID = Mutex<String?>(nil)
        /// The DM with the partner.
        let channel = Mutex<String?>(nil)
        /// The plan's groups this phone holds, by number: their channel ids.
        let groups = Mutex<[Int: String]>([:])
        /// Which channel each message goes to.
        let kinds: Mutex<SeededGenerator>
        let sent = Mutex<UInt64>(0)
        /// The server refused a request the core could not recover from.
        let refused = Mutex(false)
        /// The app was killed and is not running until the next iteration launches it.
        let away = Mutex(false)

        init(kinds: SeededGenerator) { self.kinds = Mutex(kinds) }
    }
}

/// Where a phone waits for its message to reach its readers: each phone posts the messages
/// it decrypts, under its index and with the moment it did (the sender's own copy is posted
/// under the sender's, so it never counts as delivered), and the sender's iteration waits
/// for its text at each reader. A reader whose app is away is not waited for: its copy is
/// recorded here when it arrives (after the relaunch), from the send.
final class DeliveryBoard: Sendable {
    /// How a wait for one reader ended.
    enum Delivery: Equatable {
        case arrived(ContinuousClock.Instant)
        /// The reader's app was killed before it decrypted the message.
        case readerAway
        /// Not by the deadline.
        case late
    }

    /// A message expected at one reader: when it was meant to be sent, and what kind.
    struct Expected {
        var reader: Int
        var sentAt: ContinuousClock.Instant
        var kind: String
    }

    struct State {
        var waiting: [String: CheckedContinuation<Delivery, Never>] = [:]
        var expected: [String: Expected] = [:]
        var arrived: [String: ContinuousClock.Instant] = [:]
        /// Readers whose app is not running, and what was sent to them meanwhile.
        var away: Set<Int> = []
        var unattended: [String: Expected] = [:]
    }

    let state = Mutex(State())
    let recorder: LoadRecorder

    init(recorder: LoadRecorder) { self.recorder = recorder }

    /// Says that `text`, sent at `sentAt`, will reach phone `index` (before it is sent, so a
    /// fast answer is kept); returns what to wait for, or nil when that phone is away.
    func expect(_ text: String, at index: Int, sentAt: ContinuousClock.Instant, kind: String) -> String? {
        let key = "\(index)|\(text)"
        let expected = Expected(reader: index, sentAt: sentAt, kind: kind)
        return state.withLock { s in
            guard !s.away.contains(index) else {
                s.unattended[key] = expected
                return nil
            }
            s.expected[key] = expected
            return key
        }
    }

    /// Phone `index` decrypted `text` now; one not expected there (a sender's own copy, an
    /// old one) is ignored.
    func arrived(_ text: String, at index: Int) {
        let key = "\(index)|\(text)", now = ContinuousClock.now
        enum Next { case none, resume(CheckedContinuation<Delivery, Never>), record(Expected) }
        let next = state.withLock { s -> Next in
            if let late = s.unattended.removeValue(forKey: key) { return .record(late) }
            guard s.expected[key] != nil else { return .none }
            if let waiter = s.waiting.removeValue(forKey: key) {
                s.expected[key] = nil
                return .resume(waiter)
            }
            s.arrived[key] = now
            return .none
        }
        switch next {
        case .none: break
        case .resume(let waiter): waiter.resume(returning: .arrived(now))
        case .record(let expected): recorder.chatDelivered(now - expected.sentAt, kind: expected.kind)
        }
    }

    /// Phone `index`'s app was killed: what it was expected to decrypt and has not is
    /// recorded when it does, and its waiters stop waiting.
    func away(_ index: Int) {
        let waiters = state.withLock { s -> [CheckedContinuation<Delivery, Never>] in
            s.away.insert(index)
            var waiters: [CheckedContinuation<Delivery, Never>] = []
            for (key, expected) in s.expected where expected.reader == index && s.arrived[key] == nil {
                s.expected[key] = nil
                s.unattended[key] = expected
                if let waiter = s.waiting.removeValue(forKey: key) { waiters.append(waiter) }
            }
            return waiters
        }
        for waiter in waiters { waiter.resume(returning: .readerAway) }
    }

    /// Phone `index`'s app runs again.
    func back(_ index: Int) {
        state.withLock { _ = $0.away.remove(index) }
    }

    /// How the wait for what `expect` named ended, by `until`.
    func wait(_ key: String, until: ContinuousClock.Instant, clock: ContinuousClock) async -> Delivery {
        await withCheckedContinuation { continuation in
            let already = state.withLock { s -> Delivery? in
                if let at = s.arrived.removeValue(forKey: key) {
                    s.expected[key] = nil
                    return .arrived(at)
                }
                guard s.expected[key] != nil else { return .readerAway }
                guard clock.now < until else {
                    s.expected[key] = nil
                    return .late
                }
                s.waiting[key] = continuation
                return nil
            }
            if let already { return continuation.resume(returning: already) }
            Task { [self] in
                try? await clock.sleep(until: until)
                let expired = state.withLock { s -> CheckedContinuation<Delivery, Never>? in
                    guard let waiter = s.waiting.removeValue(forKey: key) else { return nil }
                    s.expected[key] = nil
                    return waiter
                }
                expired?.resume(returning: .late)
            }
        }
    }
}
