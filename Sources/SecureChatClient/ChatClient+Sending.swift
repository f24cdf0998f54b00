import ChatCrypto
import LabCrypto
import LabKernel

extension ChatClient {
    /// Moves the first pending send (or edit) one step: member list, the members' device
    /// sets, bundles of devices without a session, a sender-key distribution, then the
    /// ciphertext. At most one request of the queue is in flight.
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
            return request(.members(channel: channel.id), "GET", "/channels/\(channel.id)/members", nil, now: now, &out)
        }
        let users = Set(channel.members.map(\.text) + [me]).sorted()
        if let user = users.first(where: { snapshot.deviceSets[$0] == nil || staleDeviceSets.contains($0) }) {
            sendStage = .working
            stats.deviceSetFetches += 1
            return request(.deviceSet(user: user), "GET", "/users/\(user)/devices", nil, now: now, &out)
        }
        let thisDevice = ChatID(myDevice)
        let recipients = users.flatMap { snapshot.deviceSets[$0]?.devices ?? [] }.filter { $0 != thisDevice }
        if let device = recipients.first(where: { !hasSession($0) && bundles[$0] == nil }) {
            sendStage = .working
            return request(.bundle(device: device.text), "GET", "/keys/\(device.text)/bundle", nil, now: now, &out)
        }
        if channel.isDM {
            guard let content = envelope(Array(head.text.utf8), to: recipients, clientID: head.clientID, &out) else { return }
            return post(head, content: content, contentType: "text", distribution: false, now: now, &out)
        }
        // A member or a device left: a new chain, so what we send next is not readable
        // with the key they hold.
        let channelID = ChatID(channel.id)
        if let reached = snapshot.keys?.distributedTo[channelID], !reached.isSubset(of: Set(recipients)) {
            snapshot.keys?.senderChains[channelID] = nil
            snapshot.keys?.distributedTo[channelID] = []
            stats.senderKeyRotations += 1
        }
        if snapshot.keys?.senderChains[channelID] == nil {
            do {
                snapshot.keys?.senderChains[channelID] = try SenderKeyChain(channelID: channel.id, chainKey: snapshot.generator.bytes(32),
                                                                             signingSeed: snapshot.generator.bytes(32))
            } catch { return block(head.clientID, "\(error)", &out) }
        }
        let undistributed = recipients.filter { !(snapshot.keys?.distributedTo[channelID]?.contains($0) ?? false) }
        if !undistributed.isEmpty, let chain = snapshot.keys?.senderChains[channelID] {
            guard let content = envelope(chain.distribution.bytes, to: undistributed, clientID: head.clientID, &out) else { return }
            var marker = head
            // Its own idempotency key, naming the chain (its signing key) and how far it has
            // gone: after a rotation the new chain's first distribution is a new message,
            // not a repeat the server would answer with the old chain's.
            let chainID = Array(chain.distribution.signingPublicKey.prefix(6)).hexString
            marker.clientID = head.clientID + "-d\(chainID)-\(snapshot.keys?.distributedTo[channelID]?.count ?? 0)"
            marker.edits = nil
            pendingDistribution = Set(undistributed)
            return post(marker, content: content, contentType: ChatEnvelope.distributionContentType, distribution: true, now: now, &out)
        }
        guard let wire = snapshot.keys?.senderChains[channelID]?.encrypt(Array(head.text.utf8)) else { return block(head.clientID, "no keys", &out) }
        stats.signatures += 1
        post(head, content: Base64.encode(wire), contentType: "text", distribution: false, now: now, &out)
    }

    func hasSession(_ device: ChatID) -> Bool { snapshot.keys?.sessions[device]?.contains { $0.ratchet.canSend } ?? false }

    /// A pairwise envelope for `devices`, or nil (and the send blocked) when encryption fails.
    mutating func envelope(_ plaintext: [UInt8], to devices: [ChatID], clientID: String, _ out: inout [ClientEffect]) -> String? {
        guard var keys = snapshot.keys, let myDevice = snapshot.deviceID else { block(clientID, "no keys", &out); return nil }
        var items: [String: ChatEnvelope.Item] = [:]
        do {
            for device in devices {
                if !hasSession(device) { stats.handshakes += 1 }
                items[device.text] = try keys.encrypt(plaintext, for: device, bundle: bundles[device], generator: &snapshot.generator)
            }
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

    /// The ciphertext goes out: a new message (POST, with its idempotency key) or an edit (PATCH).
    mutating func post(_ send: PendingSend, content: String, contentType: String, distribution: Bool, now: Instant, _ out: inout [ClientEffect]) {
        sendStage = .working
        if let original = send.edits {
            return request(.edit(clientID: send.clientID), "PATCH", "/channels/messages/\(original)", ["content": .string(content)], now: now, &out)
        }
        request(.post(clientID: send.clientID, distribution: distribution), "POST", "/channels/\(send.channelID)/messages",
                ["content": .string(content), "content_type": .string(contentType), "protocol_version": 2,
                 "sender_device_id": .string(snapshot.deviceID ?? ""), "client_message_id": .string(send.clientID)], now: now, &out)
    }

    mutating func sendResponse(_ purpose: Purpose, _ response: HTTPResponseMessage, now: Instant, _ out: inout [ClientEffect]) {
        let body = response.jsonBody
        sendStage = .idle
        if response.status == 429 || response.status >= 500 { return retryLater(response, now: now) }
        switch purpose {
        case .members(let channel):
            guard response.status == 200 else { return dropHead(response, &out) }
            let members = (body?.arrayValue ?? []).compactMap { $0["user_id"]?.stringValue.map { ChatID($0) } }
            // Someone new to this channel's list: their devices are checked afresh.
            staleDeviceSets.formUnion(members.filter { !(snapshot.channels[channel]?.members.contains($0) ?? false) && snapshot.deviceSets[$0.text] != nil }
                .map(\.text))
            snapshot.channels[channel]?.members = members
            snapshot.channels[channel]?.membersFetched = true
            snapshot.channels[channel]?.membersFetchedAt = now
        case .deviceSet(let user):
            guard response.status == 200, let body else { return dropHead(response, &out) }
            deviceSetArrived(user, body)
        case .bundle(let device):
            if response.status == 200, let body, let bundle = Self.bundle(body) {
                bundles[ChatID(device)] = bundle
            } else if let owner = snapshot.deviceSets.first(where: { $0.value.devices.contains(ChatID(device)) })?.key {
                staleDeviceSets.insert(owner)  // the device is gone: ask for the owner's set again
            }
        case .post where response.status == 409, .edit where response.status == 409:
            // The server's device set differs from ours: ask again for every member's, then
            // encrypt and send the same message (same client_message_id) again.
            if let channel = snapshot.pending.first(where: { $0.blocked == nil })?.channelID, let info = snapshot.channels[channel] {
                staleDeviceSets.formUnion(info.members.map(\.text) + [snapshot.userID ?? ""])
            }
        case .post(let clientID, let distribution):
            postAnswered(clientID: clientID, distribution: distribution, response, &out)
        case .edit(let clientID):
            guard (200..<300).contains(response.status) else { return dropHead(response, &out) }
            if let index = snapshot.pending.firstIndex(where: { $0.clientID == clientID }) {
                let sent = snapshot.pending.remove(at: index)
                let edited = sent.edits.flatMap { original in
                    snapshot.update(ChatID(original)) { message in
                        message.text = sent.text
                        message.edited = true
                        return true
                    }
                }
                if let edited { out.append(.delivered(edited)) }
            }
        default:
            break
        }
        advanceSend(now: now, &out)
    }

    /// A user's devices as the server lists them now. Recipients come from these lists, so
    /// a device no longer listed is encrypted to no more; its session stays, to read what
    /// it sent before it went and is still on its way (catch-up after time away).
    mutating func deviceSetArrived(_ user: String, _ body: JSONValue) {
        let devices = (body["devices"]?.arrayValue ?? []).compactMap { $0["device_id"]?.stringValue.map { ChatID($0) } }
        let version = body["version"]?.numberValue.map(Int.init) ?? 0
        for gone in snapshot.deviceSets[user]?.devices ?? [] where !devices.contains(gone) { bundles[gone] = nil }
        snapshot.deviceSets[user] = DeviceSet(version: version, devices: devices)
        staleDeviceSets.remove(user)
    }

    mutating func postAnswered(clientID: String, distribution: Bool, _ response: HTTPResponseMessage, _ out: inout [ClientEffect]) {
        let body = response.jsonBody
        guard response.status == 200 || response.status == 201 else { return dropHead(response, &out) }
        if distribution {
            let channel = body?["channel_id"]?.stringValue ?? ""
            snapshot.keys?.distributedTo[ChatID(channel), default: []].formUnion(pendingDistribution)
            if let id = body?["id"]?.stringValue { markSeen(id) }
            return
        }
        guard let index = snapshot.pending.firstIndex(where: { $0.clientID == clientID }) else { return }
        let sent = snapshot.pending.remove(at: index)
        bundles = [:]
        // Kept for the echo, unless the socket's echo was delivered first.
        if let id = body?["id"]?.stringValue, !snapshot.holds(ChatID(id), in: sent.channelID) { snapshot.ownPlaintexts[id] = sent.text }
        if let body { ingest(body, &out) }
    }

    /// A refusal that will not pass: the head of the queue is dropped and the app told.
    mutating func dropHead(_ response: HTTPResponseMessage, _ out: inout [ClientEffect]) {
        guard let head = snapshot.pending.first(where: { $0.blocked == nil }) else { return }
        snapshot.pending.removeAll { $0.clientID == head.clientID }
        out.append(.surfaced(.sendRefused(clientID: head.clientID, status: response.status, detail: Self.detail(response.jsonBody))))
    }

    /// 429 and 5xx: wait (`Retry-After`, else 2 s) and try the same step again.
    mutating func retryLater(_ response: HTTPResponseMessage, now: Instant) {
        let seconds = response.header("Retry-After").flatMap(Int64.init) ?? 2
        retrySend(after: .seconds(max(1, min(seconds, 3_600))), now: now)
    }

    static func bundle(_ json: JSONValue) -> PreKeyBundle? {
        guard let identity = json["identity_key"]?.stringValue.flatMap(Base64.decode),
              let spk = json["signed_pre_key"]?.stringValue.flatMap(Base64.decode),
              let signature = json["signed_pre_key_signature"]?.stringValue.flatMap(Base64.decode) else { return nil }
        let oneTime = json["one_time_pre_key"]?.stringValue.flatMap(Base64.decode).map { (id: UInt32(0), key: $0) }
        return PreKeyBundle(identityKey: identity, signedPreKey: spk, signedPreKeySignature: signature, oneTimePreKey: oneTime)
    }
}
