import Foundation
import LabKernel
import Live
import SecureChatClient
import Synchronization

/// A virtual phone of a load test on the chat server (d3chat): the end-to-end encrypted
/// chat client core the simulator runs, on real sockets (`LiveChatPhone`). Phones come in
/// pairs (`partner`): before the run each registers a user of its own (keys, one-time
/// pre-keys, its socket); its first iteration opens a DM with its partner; each iteration
/// sends one message, encrypted to the partner's devices, and ends when the partner's
/// phone has decrypted it (`chat.delivery_latency{kind=dm}` from the step's start) or
/// after the chat deadline (failed). Every HTTP exchange is recorded by route.
final class ChatLoadPhone: Sendable {
    let index: Int
    let phone: LiveChatPhone
    let username: String
    let state = Progress()
    let board: DeliveryBoard
    let deadline: Duration

    init(index: Int, base: String, runTag: String, seed: StreamSeed, http: HTTPClient, requestTimeout: Duration, board: DeliveryBoard,
         recorder: LoadRecorder) throws {
        self.index = index
        self.board = board
        deadline = requestTimeout * 3
        username = "loadtest-\(runTag)-\(index)"
        phone = try LiveChatPhone(base: base, client: ChatClient(snapshot: ChatClient.Snapshot(seed: seed)), http: http,
                                  requestTimeout: requestTimeout) { request, took, failed in
            recorder.request(request.route, stack: "chat", latency: took, failed: failed)
        }
        // What the core tells the app: this phone's DM, and the messages it decrypted.
        Task { [phone, state, board, index] in
            for await effect in phone.effects {
                switch effect {
                case .channelAdded(let id): state.channel.withLock { $0 = $0 ?? id }
                case .delivered(let message): board.arrived(message.text, at: index)
                case .surfaced(.requestFailed), .loggedOut:
                    // Before the socket is up this ends the registration (a refused sign-up).
                    state.refused.withLock { $0 = true }
                case .request, .openSocket, .socketSend, .closeSocket, .channelRemoved, .invited, .typing, .presence, .historyLoaded, .surfaced:
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

    /// One iteration meant to start at `intended`: the first opens the DM with `partner`,
    /// every one sends a message and waits for the partner's phone to decrypt it. Both
    /// phones registered before the run (`register`); a phone whose registration failed
    /// fails each iteration.
    func iterate(partner: ChatLoadPhone, intended: ContinuousClock.Instant, clock: ContinuousClock, recorder: LoadRecorder) async -> Bool {
        guard state.userID.withLock({ $0 }) != nil, let partnerID = partner.state.userID.withLock({ $0 }) else { return false }
        if state.channel.withLock({ $0 }) == nil {
            await phone.feed(.openDM(userID: partnerID))
            let until = clock.now + deadline
            while state.channel.withLock({ $0 }) == nil && clock.now < until { try? await clock.sleep(for: .milliseconds(20)) }
        }
        guard let dm = state.channel.withLock({ $0 }) else { return false }
        let number = state.sent.withLock { count in
            count += 1
            return count
        }
        let text = "\(username) message \(number)"
        let delivered = board.expect(text, at: partner.index)
        await phone.feed(.send(channelID: dm, text: text))
        guard await board.wait(delivered, deadline: deadline) else { return false }
        recorder.chatDelivered(clock.now - intended)
        return true
    }
}

extension ChatLoadPhone {
    /// How far the phone is: the user id the server gave it once registered, its DM, the
    /// messages it sent.
    final class Progress: Sendable {
        let userID = Mutex<String?>(nil)
        let channel = Mutex<String?>(nil)
        let sent = Mutex<UInt64>(0)
        /// The server refused a request the core could not recover from.
        let refused = Mutex(false)
    }
}

/// Where a phone waits for its message to reach its partner: each phone posts the messages
/// it decrypts, under its index (the sender's own copy is posted under the sender's, so it
/// never counts as delivered), and the sender's iteration waits for its text at the partner.
final class DeliveryBoard: Sendable {
    struct State {
        var waiting: [String: CheckedContinuation<Bool, Never>] = [:]
        var expected: Set<String> = []
        var arrived: Set<String> = []
    }

    let state = Mutex(State())

    /// Says that `text` will be waited for at phone `index` (before it is sent, so a fast
    /// answer is kept); returns what to wait for.
    func expect(_ text: String, at index: Int) -> String {
        let key = "\(index)|\(text)"
        state.withLock { _ = $0.expected.insert(key) }
        return key
    }

    /// Phone `index` decrypted `text`; one not expected there (a sender's own copy, an old
    /// one) is ignored.
    func arrived(_ text: String, at index: Int) {
        let text = "\(index)|\(text)"
        let waiter = state.withLock { s -> CheckedContinuation<Bool, Never>? in
            guard s.expected.contains(text) else { return nil }
            if let waiter = s.waiting.removeValue(forKey: text) {
                s.expected.remove(text)
                return waiter
            }
            s.arrived.insert(text)
            return nil
        }
        waiter?.resume(returning: true)
    }

    /// Whether what `expect` named arrived within `deadline`.
    func wait(_ text: String, deadline: Duration) async -> Bool {
        await withCheckedContinuation { continuation in
            let already = state.withLock { s -> Bool in
                if s.arrived.remove(text) != nil {
                    s.expected.remove(text)
                    return true
                }
                s.waiting[text] = continuation
                return false
            }
            if already { return continuation.resume(returning: true) }
            Task { [self] in
                try? await Task.sleep(for: deadline)
                let expired = state.withLock { s -> CheckedContinuation<Bool, Never>? in
                    s.expected.remove(text)
                    return s.waiting.removeValue(forKey: text)
                }
                expired?.resume(returning: false)
            }
        }
    }
}
