import ChatCrypto
import LabCrypto
import LabKernel

extension ChatClient {
    /// Moves the first pending send one step: member list, device bundles, sender-key
    /// distribution, then the ciphertext. At most one request of a send is in flight.
    mutating func advanceSend(now: Instant, _ out: inout [ClientEffect]) {
        guard sendStage == .idle, socket == .open, channelsLoaded, let head = snapshot.pending.first(where: { $0.blocked == nil }) else { return }
        guard let channel = snapshot.channels[head.channelID], let me = snapshot.userID, let myDevice = snapshot.deviceID else {
            snapshot.pending.removeAll { $0.clientID == head.clientID }
            out.append(.surfaced(.sendRefused(clientID: head.clientID, status: 404, detail: "unknown channel \(head.channelID)")))
            return advanceSend(now: now, &out)
        }
        let stale = channel.membersFetchedAt.map { now - $0 > .seconds(60) } ?? true
        if !channel.membersFetched || (!channel.isDM && stale) {
            sendStage = .working
            return request(.members(channel: channel.id), "GET", "/channels/\(channel.id)/members", nil, &out)
        }
        let users = Set(channel.members + [me]).sorted()
        for user in users where !bundlesFetched.contains(user) {
            let devices = snapshot.devicesOfUser[user]
            let missing = devices.map { $0.contains { $0 != myDevice && !hasSession($0) && bundles[$0] == nil } } ?? true
            if missing {
                sendStage = .working
                return request(.bundles(user: user), "GET", "/keys/\(user)/bundles", nil, &out)
            }
        }
        let recipients = users.flatMap { snapshot.devicesOfUser[$0] ?? [] }.filter { $0 != myDevice }
        if channel.isDM {
            guard let content = envelope(Array(head.text.utf8), to: recipients, clientID: head.clientID, &out) else { return }
            post(head, content: content, contentType: "text", distribution: false, &out)
            return
        }
        // A member left (or a device went): a new chain, so what we send next is not
        // readable with the key they hold.
        if let reached = snapshot.keys?.distributedTo[channel.id], !reached.isSubset(of: Set(recipients)) {
            snapshot.keys?.senderChains[channel.id] = nil
            snapshot.keys?.distributedTo[channel.id] = []
        }
        if snapshot.keys?.senderChains[channel.id] == nil {
            do {
                snapshot.keys?.senderChains[channel.id] = try SenderKeyChain(channelID: channel.id, chainKey: snapshot.generator.bytes(32),
                                                                             signingSeed: snapshot.generator.bytes(32))
            } catch { return block(head.clientID, "\(error)", &out) }
        }
        let undistributed = recipients.filter { !(snapshot.keys?.distributedTo[channel.id]?.contains($0) ?? false) }
        if !undistributed.isEmpty {
            let distribution = snapshot.keys!.senderChains[channel.id]!.distribution.bytes
            guard let content = envelope(distribution, to: undistributed, clientID: head.clientID, &out) else { return }
            var marker = head
            marker.clientID = head.clientID + "-d\(snapshot.keys?.distributedTo[channel.id]?.count ?? 0)"
            pendingDistribution = Set(undistributed)
            return post(marker, content: content, contentType: ChatEnvelope.distributionContentType, distribution: true, &out)
        }
        let wire = snapshot.keys!.senderChains[channel.id]!.encrypt(Array(head.text.utf8))
        post(head, content: Base64.encode(wire), contentType: "text", distribution: false, &out)
    }

    func hasSession(_ device: String) -> Bool { snapshot.keys?.sessions[device]?.contains { $0.ratchet.canSend } ?? false }

    /// A pairwise envelope for `devices`, or nil (and the send blocked) when encryption fails.
    mutating func envelope(_ plaintext: [UInt8], to devices: [String], clientID: String, _ out: inout [ClientEffect]) -> String? {
        guard var keys = snapshot.keys, let myDevice = snapshot.deviceID else { block(clientID, "no keys", &out); return nil }
        var items: [String: ChatEnvelope.Item] = [:]
        do {
            for device in devices { items[device] = try keys.encrypt(plaintext, for: device, bundle: bundles[device], generator: &snapshot.generator) }
        } catch {
            block(clientID, "\(error)", &out)
            return nil
        }
        snapshot.keys = keys
        guard !items.isEmpty else { block(clientID, "no device to encrypt for", &out); return nil }
        return ChatEnvelope.encode(from: myDevice, to: items)
    }

    /// The message stays queued and nothing is sent: never plaintext on failure.
    mutating func block(_ clientID: String, _ reason: String, _ out: inout [ClientEffect]) {
        if let index = snapshot.pending.firstIndex(where: { $0.clientID == clientID }) { snapshot.pending[index].blocked = reason }
        sendStage = .idle
        out.append(.surfaced(.encryptionFailed(clientID: clientID, reason: reason)))
    }

    mutating func post(_ send: PendingSend, content: String, contentType: String, distribution: Bool, _ out: inout [ClientEffect]) {
        sendStage = .working
        request(.post(clientID: send.clientID, distribution: distribution), "POST", "/channels/\(send.channelID)/messages",
                ["content": .string(content), "content_type": .string(contentType), "protocol_version": 2,
                 "sender_device_id": .string(snapshot.deviceID ?? ""), "client_message_id": .string(send.clientID)], &out)
    }

    mutating func sendResponse(_ purpose: Purpose, _ response: HTTPResponseMessage, now: Instant, _ out: inout [ClientEffect]) {
        let body = response.jsonBody
        sendStage = .idle
        switch purpose {
        case .members(let channel):
            guard response.status == 200 else { return retryLater(response, &out) }
            snapshot.channels[channel]?.members = (body?.arrayValue ?? []).compactMap { $0["user_id"]?.stringValue }
            snapshot.channels[channel]?.membersFetched = true
            snapshot.channels[channel]?.membersFetchedAt = now
        case .bundles(let user):
            guard response.status == 200 else { return retryLater(response, &out) }
            var devices: [String] = []
            for item in body?.arrayValue ?? [] {
                guard let device = item["device_id"]?.stringValue, let bundle = Self.bundle(item) else { continue }
                devices.append(device)
                bundles[device] = bundle
            }
            snapshot.devicesOfUser[user] = devices
            bundlesFetched.insert(user)
        case .post(let clientID, let distribution):
            switch response.status {
            case 200, 201:
                if distribution {
                    let channel = body?["channel_id"]?.stringValue ?? ""
                    snapshot.keys?.distributedTo[channel, default: []].formUnion(pendingDistribution)
                    if let id = body?["id"]?.stringValue { markSeen(id) }
                } else {
                    guard let index = snapshot.pending.firstIndex(where: { $0.clientID == clientID }) else { break }
                    let sent = snapshot.pending.remove(at: index)
                    bundles = [:]
                    bundlesFetched = []
                    if let id = body?["id"]?.stringValue { snapshot.ownPlaintexts[id] = sent.text }
                    if let body { ingest(body, &out) }
                }
            case 429, 500...599:
                return retryLater(response, &out)
            default:
                let base = distribution ? String(clientID.prefix(36)) : clientID
                snapshot.pending.removeAll { $0.clientID == base }
                out.append(.surfaced(.sendRefused(clientID: base, status: response.status, detail: Self.detail(body))))
            }
        case .announceSenderKey:
            break
        default:
            break
        }
        advanceSend(now: now, &out)
    }

    /// 429 and 5xx: wait (`Retry-After`, else 2 s) and try the same step again.
    mutating func retryLater(_ response: HTTPResponseMessage, _ out: inout [ClientEffect]) {
        sendStage = .waitingRetry
        let seconds = response.header("Retry-After").flatMap(Int.init) ?? 2
        out.append(.startTimer(after: .seconds(Int64(max(1, seconds)))))
    }

    static func bundle(_ json: JSONValue) -> PreKeyBundle? {
        guard let identity = json["identity_key"]?.stringValue.flatMap(Base64.decode),
              let spk = json["signed_pre_key"]?.stringValue.flatMap(Base64.decode),
              let signature = json["signed_pre_key_signature"]?.stringValue.flatMap(Base64.decode) else { return nil }
        let oneTime = json["one_time_pre_key"]?.stringValue.flatMap(Base64.decode).map { (id: UInt32(0), key: $0) }
        return PreKeyBundle(identityKey: identity, signedPreKey: spk, signedPreKeySignature: signature, oneTimePreKey: oneTime)
    }
}
