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
final class ChatLoadPhone: Sendable {
    let index: Int
    let phone: LiveChatPhone
    let username: String
    let state: Progress
    let board: DeliveryBoard
    let deadline: Duration

    init(index: Int, base: String, runTag: String, seed: StreamSeed, http: HTTPClient, requestTimeout: Duration, board: DeliveryBoard,
         recorder: LoadRecorder) throws {
        self.index = index
        self.board = board
        state = Progress(kinds: seed.child("kinds").generator())
        deadline = requestTimeout * 3
        username = "loadtest-\(runTag)-\(index)"
        phone = try LiveChatPhone(base: base, client: ChatClient(snapshot: ChatClient.Snapshot(seed: seed)), http: http,
                                  requestTimeout: requestTimeout) { request, took, failed in
            recorder.request(request.route, stack: "chat", latency: took, failed: failed)
        }
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

    /// Registers this phone's user and waits until its socket is open; false when the
    /// server refused or the deadline passed.
    func register(clock: ContinuousClock) async -> Bool {
        var password = StreamSeed(UInt64(index)).child(username).generator()
        await phone.feed(.register(username: username, password: "pw-\(password.next())-\(password.next())", deviceName: "loadtest phone \(index)"))
        let until = clock.now + deadline
        while clock.now < until && !state.refused.withLock({ $0 }) {
            let (connected, id) = await (phone.client.isConnected, phone.client.snapshot.userID)
            if connected, let id {
                state.userID.withLock { $0 = id }
                return true
            }
            try? await clock.sleep(for: .milliseconds(20))
        }
        return false
    }

    /// The id of the channel of this phone's that `match` picks, once its client holds it
    /// (nil after the deadline).
    func channel(until: ContinuousClock.Instant, clock: ContinuousClock, _ match: @escaping @Sendable (ChatClient.ChannelInfo) -> Bool) async -> String? {
        while true {
            if let id = await phone.client.snapshot.channels.values.first(where: match)?.id { return id }
            guard clock.now < until else { return nil }
            try? await clock.sleep(for: .milliseconds(20))
        }
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
    func iterate(partner: ChatLoadPhone, phones: [ChatLoadPhone], plan: ChatGroupPlan, intended: ContinuousClock.Instant, clock: ContinuousClock,
                 recorder: LoadRecorder) async -> Bool {
        guard state.userID.withLock({ $0 }) != nil else { return false }
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
        let awaited = readers.map { board.expect(text, at: $0.index) }
        // Announced by `typing.start` as often as the scenario's users do (the server fans
        // it out to the channel's other members), as the simulator's users do.
        if state.kinds.withLock({ $0.chance(plan.typingShare) }) { await phone.feed(.typing(channelID: channel, started: true)) }
        await phone.feed(.send(channelID: channel, text: text))
        let until = clock.now + deadline
        var everyone = true
        for key in awaited {
            guard let arrival = await board.wait(key, until: until, clock: clock) else {
                everyone = false
                continue
            }
            recorder.chatDelivered(arrival - intended, kind: toGroup ? "group" : "dm")
        }
        return everyone
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

        init(kinds: SeededGenerator) { self.kinds = Mutex(kinds) }
    }
}

/// Where a phone waits for its message to reach its readers: each phone posts the messages
/// it decrypts, under its index and with the moment it did (the sender's own copy is posted
/// under the sender's, so it never counts as delivered), and the sender's iteration waits
/// for its text at each reader.
final class DeliveryBoard: Sendable {
    struct State {
        var waiting: [String: CheckedContinuation<ContinuousClock.Instant?, Never>] = [:]
        var expected: Set<String> = []
        var arrived: [String: ContinuousClock.Instant] = [:]
    }

    let state = Mutex(State())

    /// Says that `text` will be waited for at phone `index` (before it is sent, so a fast
    /// answer is kept); returns what to wait for.
    func expect(_ text: String, at index: Int) -> String {
        let key = "\(index)|\(text)"
        state.withLock { _ = $0.expected.insert(key) }
        return key
    }

    /// Phone `index` decrypted `text` now; one not expected there (a sender's own copy, an
    /// old one) is ignored.
    func arrived(_ text: String, at index: Int) {
        let text = "\(index)|\(text)", now = ContinuousClock.now
        let waiter = state.withLock { s -> CheckedContinuation<ContinuousClock.Instant?, Never>? in
            guard s.expected.contains(text) else { return nil }
            if let waiter = s.waiting.removeValue(forKey: text) {
                s.expected.remove(text)
                return waiter
            }
            s.arrived[text] = now
            return nil
        }
        waiter?.resume(returning: now)
    }

    /// When what `expect` named arrived, if it did by `until`.
    func wait(_ text: String, until: ContinuousClock.Instant, clock: ContinuousClock) async -> ContinuousClock.Instant? {
        await withCheckedContinuation { continuation in
            let already = state.withLock { s -> ContinuousClock.Instant?? in
                if let at = s.arrived.removeValue(forKey: text) {
                    s.expected.remove(text)
                    return .some(at)
                }
                guard clock.now < until else {
                    s.expected.remove(text)
                    return .some(nil)
                }
                s.waiting[text] = continuation
                return nil
            }
            if let already { return continuation.resume(returning: already) }
            Task { [self] in
                try? await clock.sleep(until: until)
                let expired = state.withLock { s -> CheckedContinuation<ContinuousClock.Instant?, Never>? in
                    s.expected.remove(text)
                    return s.waiting.removeValue(forKey: text)
                }
                expired?.resume(returning: nil)
            }
        }
    }
}
