import AIBridgeWire
import LabCrypto
public import LabKernel

extension BridgeDaemon {
    /// The commands this daemon serves, in the order `unknown_command` lists them.
    enum Command: String, CaseIterable {
        case aiChat = "ai_chat"
        case listModels = "list_models"
    }

    static var supported: [String] { Command.allCases.map(\.rawValue) }

    /// A tunnel frame from the relay.
    mutating func received(_ text: String, now: Instant, _ out: inout [DaemonEffect]) {
        guard let message = TunnelMessage(text: text) else { return }
        switch message {
        case .challenge(let nonce):
            let signature = identity.sign(TunnelMessage.signedHello(nonce: nonce, serverPublicKey: keyPair.publicKey))
            link = .challenged
            out.append(.send(TunnelMessage.hello(daemonID: config.daemonID, identityKey: identity.publicKey, serverPublicKey: keyPair.publicKey,
                                                 signature: signature).text))
        case .welcome:
            link = .ready
            reconnectAttempts = 0
            // The relay forgets sessions with the tunnel that carried them: offer it again.
            if let session, session.expiresAt > now {
                out.append(.send(TunnelMessage.pairingOpen(sessionID: session.id, pin: session.pin, expiresAt: 0).text))
            }
        case .pairingClosed(let id, let reason):
            guard session?.id == id else { break }
            session = nil
            timers.cancel(.pairing)
            out.append(.pairingClosed(reason: reason))
            if config.keepPairingOpen { openPairing(now: now, &out) }
        case .pairIssue(let request, let id, let device):
            guard let open = session, open.id == id, open.expiresAt > now else {
                out.append(.send(TunnelMessage.pairRefused(requestID: request, reason: "no such pairing session").text))
                break
            }
            // Single use: the session ends as its token is issued.
            session = nil
            timers.cancel(.pairing)
            let token = "ab_" + generator.token(32)
            stats.paired += 1
            out.append(.send(TunnelMessage.pairIssued(requestID: request, token: token, serverPublicKey: keyPair.publicKey).text))
            out.append(.paired(deviceID: device))
            if config.keepPairingOpen { openPairing(now: now, &out) }
        case .request(let id, let body):
            stats.requests += 1
            dispatch(id, body, now: now, &out)
        case .cancel(let id):
            guard let active = requests.removeValue(forKey: id) else { break }
            timers.cancel(.request(id))
            if let run = active.run { out.append(.stopCommand(run: run)) }
        case .hello, .pairingOpen, .pairingClose, .pairIssued, .pairRefused, .response, .streamStart, .streamChunk, .streamEnd, .streamError:
            break  // the daemon's own messages coming back: nothing to do
        }
    }

    /// One request: open it if sealed, read the envelope, match the command, validate
    /// its payload, run it.
    mutating func dispatch(_ id: Int, _ body: JSONValue, now: Instant, _ out: inout [DaemonEffect]) {
        var key: [UInt8]?
        var value = body
        do {
            if let sealed = body["sealed"] {
                let opened = try BridgeSeal.open(sealed, with: keyPair)
                (value, key) = (opened.envelope, opened.key)
                stats.sealed += 1
            }
            let envelope = try CommandEnvelope(parsing: value)
            guard let command = Command(rawValue: envelope.command) else {
                throw BridgeFailure.unknownCommand(envelope.command, supported: Self.supported)
            }
            switch command {
            case .aiChat: try chat(id, envelope.payload, key: key, now: now, &out)
            case .listModels:
                try Self.expectOnly([], in: envelope.payload)
                let models: JSONValue = ["models": .array(config.models.map { .string($0) })]
                out.append(.send(TunnelMessage.response(requestID: id, status: 200, body: frame(models, key)).text))
            }
        } catch let failure as BridgeFailure {
            stats.refused += 1
            out.append(.send(TunnelMessage.response(requestID: id, status: failure.status, body: failure.body).text))
        } catch {
            stats.refused += 1
            out.append(.send(TunnelMessage.response(requestID: id, status: 400, body: BridgeFailure.invalidEnvelope("unreadable request").body).text))
        }
    }

    /// `ai_chat {conversation_id, message, stream?}`: a streamed answer (or, with
    /// `stream: false`, one response).
    mutating func chat(_ id: Int, _ payload: [String: JSONValue], key: [UInt8]?, now: Instant, _ out: inout [DaemonEffect]) throws(BridgeFailure) {
        try Self.expectOnly(["conversation_id", "message", "stream"], in: payload)
        guard case .string(let conversation)? = payload["conversation_id"], !conversation.isEmpty, conversation.utf8.count <= 128 else {
            throw .invalidPayload(field: "conversation_id", message: "'conversation_id' is a string of 1 to 128 characters")
        }
        guard case .string(let message)? = payload["message"], !message.trimmingWhitespace().isEmpty else {
            throw .invalidPayload(field: "message", message: "'message' is a non-empty string")
        }
        guard message.utf8.count <= 32 * 1024 else { throw .invalidPayload(field: "message", message: "'message' is at most 32 KiB") }
        var streamed = true
        if let flag = payload["stream"] {
            guard case .bool(let value) = flag else { throw .invalidPayload(field: "stream", message: "'stream' is true or false") }
            streamed = value
        }
        let words = message.split(whereSeparator: { $0 == " " || $0 == "\n" }).count
        switch config.chat {
        case .scripted(let think, let perChunk, let every):
            let answer = Self.answer(words: words)
            guard streamed else {
                let body: JSONValue = ["conversation_id": .string(conversation), "reply": .string(answer), "usage": Self.usage(words, answer)]
                out.append(.send(TunnelMessage.response(requestID: id, status: 200, body: frame(body, key)).text))
                return
            }
            requests[id] = Active(key: key, conversation: conversation, chunks: Self.chunks(answer, perChunk), every: every, run: nil, promptTokens: words)
            out.append(.send(TunnelMessage.streamStart(requestID: id).text))
            timers.arm(.request(id), at: now + think)
        case .command(let argv, let timeout):
            let run = nextRun
            nextRun += 1
            requests[id] = Active(key: key, conversation: conversation, chunks: [], every: .zero, run: run, promptTokens: words)
            out.append(.send(TunnelMessage.streamStart(requestID: id).text))
            out.append(.startCommand(run: run, argv: argv, input: message, timeout: timeout))
        }
    }

    /// The next chunk of a scripted answer, or its end.
    mutating func stream(_ id: Int, now: Instant, _ out: inout [DaemonEffect]) {
        guard var active = requests[id], link == .ready else { return }
        if active.next < active.chunks.count {
            out.append(.send(TunnelMessage.streamChunk(requestID: id, data: frame(["text": .string(active.chunks[active.next])], active.key)).text))
            active.next += 1
            requests[id] = active
            timers.arm(.request(id), at: now + active.every)
        } else {
            requests[id] = nil
            let end: JSONValue = ["conversation_id": .string(active.conversation), "usage": Self.usage(active.promptTokens, active.chunks.joined())]
            out.append(.send(TunnelMessage.streamEnd(requestID: id, data: frame(end, active.key)).text))
        }
    }

    static func expectOnly(_ keys: Set<String>, in payload: [String: JSONValue]) throws(BridgeFailure) {
        if let extra = payload.keys.sorted().first(where: { !keys.contains($0) }) {
            throw .invalidPayload(field: extra, message: "'\(extra.prefix(64))' is not a field of this command")
        }
    }

    /// The scripted model's answer: about the prompt's length, never its words.
    public static func answer(words: Int) -> String {
        "I read your \(words)-word message. Here is a considered answer, streamed in small pieces so the phone can show it as it comes. "
            + "Ask me to go deeper on any part of it."
    }

    static func usage(_ prompt: Int, _ answer: String) -> JSONValue {
        let completion = answer.split(separator: " ").count
        return ["prompt_tokens": .number(Double(prompt)), "completion_tokens": .number(Double(completion)), "total_tokens": .number(Double(prompt + completion))]
    }

    /// `words` words per chunk; the chunks joined are the text.
    static func chunks(_ text: String, _ words: Int) -> [String] {
        let pieces = text.split(separator: " ", omittingEmptySubsequences: false).map(String.init)
        let size = max(1, words)
        return stride(from: 0, to: pieces.count, by: size).map { start in
            (start == 0 ? "" : " ") + pieces[start..<min(pieces.count, start + size)].joined(separator: " ")
        }
    }
}
