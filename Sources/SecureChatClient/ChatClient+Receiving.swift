import ChatCrypto
import LabCrypto
import LabKernel

extension ChatClient {
    /// A message from a page or the socket: once per id, decrypted, placed in its
    /// channel's timeline by `created_at` (then id), and handed to the app.
    mutating func ingest(_ json: JSONValue, _ out: inout [ClientEffect]) {
        guard let id = json["id"]?.stringValue, let channel = json["channel_id"]?.stringValue else { return }
        let compactID = ChatID(id)
        guard !snapshot.holds(compactID, in: channel), !seenOnly.contains(compactID) else { return }
        let version = json["protocol_version"]?.numberValue ?? 1
        let content = json["content"]?.stringValue ?? ""
        let senderDevice = json["sender_device_id"]?.stringValue
        let contentType = json["content_type"]?.stringValue ?? "text"
        var text: String
        if version != 2 {
            text = content
        } else if let own = snapshot.ownPlaintexts[id] {
            text = own
        } else if senderDevice == snapshot.deviceID {
            if contentType == ChatEnvelope.distributionContentType { markSeen(id); return }
            // Our own message, echoed before the POST's answer: the pending send has its text.
            let clientID = json["client_message_id"]?.stringValue
            text = snapshot.pending.first { $0.clientID == clientID }?.text ?? ""
            snapshot.ownPlaintexts[id] = text
        } else if contentType == ChatEnvelope.distributionContentType {
            markSeen(id)
            return receiveDistribution(content, channel: channel, from: senderDevice ?? "", id: id, &out)
        } else if snapshot.channels[channel]?.isDM ?? (ChatEnvelope.decode(content) != nil) {
            guard let plaintext = openPairwise(content, id: id, &out) else { return }
            text = plaintext
        } else {
            let key = SenderKeyOwner(channel: channel, senderDevice: senderDevice)
            switch openGroup(content, key: key, id: id, &out) {
            case .plaintext(let plaintext): text = plaintext
            case .otherChain:
                // Its distribution has not arrived yet (or never will: it was sent while this
                // device was not a member); the oldest go when a sender has too many waiting.
                if snapshot.heldGroup == nil { snapshot.heldGroup = [:] }
                snapshot.heldGroup![key, default: []].append(json.canonicalText)
                if snapshot.heldGroup![key]!.count > Self.maxHeldPerSender { snapshot.heldGroup![key]!.removeFirst() }
                return
            case .unreadable: return
            }
        }
        deliver(json, text: text, &out)
    }

    /// What a group message came to: its text, a chain this device holds no key for (yet),
    /// or nothing (counted: a failure, or sent before this device had the key).
    enum GroupOpening {
        case plaintext(String)
        case otherChain
        case unreadable
    }

    mutating func deliver(_ json: JSONValue, text: String, _ out: inout [ClientEffect]) {
        guard let id = json["id"]?.stringValue, let channel = json["channel_id"]?.stringValue else { return }
        let origin = origin(in: channel, senderID: ChatID(json["sender_id"]?.stringValue ?? ""),
                            senderDeviceID: json["sender_device_id"]?.stringValue.map { ChatID($0) })
        let message = ChatClientMessage(id: ChatID(id), origin: origin, text: text, createdAt: ChatTime(json["created_at"]?.stringValue ?? ""),
                                        edited: json["edited_at"]?.stringValue != nil, deleted: false)
        snapshot.insert(message, in: channel)
        if let editedAt = json["edited_at"]?.stringValue { snapshot.noteEdit(message.compactID, at: editedAt) }
        // Delivered, the message holds its text; the copy kept for the echo is not read again.
        snapshot.ownPlaintexts[id] = nil
        out.append(.delivered(message))
    }

    /// The record of where a message came from, shared with a recent message of its
    /// channel from the same sender and device when there is one. Looking among the
    /// channel's latest messages needs no table of origins (a table per client cost more
    /// than the records it saved), and it finds them in a restored snapshot too: a table
    /// made by each launch shared nothing with the messages of the launches before.
    func origin(in channel: String, senderID: ChatID, senderDeviceID: ChatID?) -> MessageOrigin {
        for message in (snapshot.timelines[channel] ?? []).suffix(Self.originLookback).reversed() {
            let origin = message.origin
            if origin.senderID == senderID && origin.senderDeviceID == senderDeviceID { return origin }
        }
        return MessageOrigin(channelID: ChatID(channel), senderID: senderID, senderDeviceID: senderDeviceID)
    }

    /// How many of a channel's latest messages `origin(in:…)` looks at: a DM has two
    /// senders and a group's conversation a handful at a time.
    static let originLookback = 16

    static let maxHeldPerSender = 200

    mutating func markSeen(_ text: String) {
        let id = ChatID(text)
        guard seenOnly.insert(id).inserted else { return }
        if snapshot.seenWithoutTimeline == nil { snapshot.seenWithoutTimeline = [] }
        snapshot.seenWithoutTimeline!.append(id)
        // Trimmed a tenth at a time, in place, so a full list costs no copy per id.
        let excess = snapshot.seenWithoutTimeline!.count - Self.seenLimit
        if excess > Self.seenLimit / 10 {
            for old in snapshot.seenWithoutTimeline!.prefix(excess) { seenOnly.remove(old) }
            snapshot.seenWithoutTimeline!.removeFirst(excess)
        }
    }

    mutating func openPairwise(_ content: String, id: String, _ out: inout [ClientEffect]) -> String? {
        guard let bytes = openEnvelope(content, id: id, &out) else { return nil }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Our item of a pairwise envelope, decrypted; nil (and counted) when it fails.
    mutating func openEnvelope(_ content: String, id: String, _ out: inout [ClientEffect]) -> [UInt8]? {
        guard let envelope = ChatEnvelope.decode(content), let device = snapshot.deviceID else {
            fail(id, "not an envelope", &out)
            return nil
        }
        guard let item = envelope.to[device] else {
            stats.notAddressed += 1  // sent before this device existed
            return nil
        }
        guard var keys = snapshot.keys else { return nil }
        if item.prekey != nil { stats.handshakes += 1 }
        do {
            let plaintext = try keys.decrypt(item, from: ChatID(envelope.from))
            snapshot.keys = keys
            stats.decrypted += 1
            return plaintext
        } catch {
            fail(id, "\(error)", &out)
            return nil
        }
    }

    mutating func fail(_ id: String, _ reason: String, _ out: inout [ClientEffect]) {
        stats.decryptionFailures += 1
        out.append(.surfaced(.decryptionFailed(messageID: id, reason: reason)))
    }

    mutating func receiveDistribution(_ content: String, channel: String, from device: String, id: String, _ out: inout [ClientEffect]) {
        guard let bytes = openEnvelope(content, id: id, &out) else { return }
        do {
            let distribution = try SenderKeyDistribution(bytes: bytes)
            let key = SenderKeyOwner(channel: channel, senderDevice: device)
            var chains = snapshot.keys?.receivers[key] ?? []
            chains.insert(SenderKeyReceiver(channelID: channel, distribution: distribution), at: 0)
            snapshot.keys?.receivers[key] = Array(chains.prefix(ChatKeyStore.maxChainsPerSender))
            // Messages that came before their key, in the order they came.
            for held in snapshot.heldGroup?.removeValue(forKey: key) ?? [] {
                if let json = try? JSONValue.parse(held) { ingest(json, &out) }
            }
            if snapshot.heldGroup?.isEmpty == true { snapshot.heldGroup = nil }
        } catch {
            fail(id, "\(error)", &out)
        }
    }

    /// Opens a group message with the sender's chains this device holds, newest first.
    /// The wire names no chain, so a signature that verifies under none of them means a
    /// chain whose distribution has not come (or never will): not a failure.
    mutating func openGroup(_ content: String, key: SenderKeyOwner, id: String, _ out: inout [ClientEffect]) -> GroupOpening {
        guard let wire = Base64.decode(content) else {
            fail(id, "not base64", &out)
            return .unreadable
        }
        let chains = snapshot.keys?.receivers[key] ?? []
        for index in chains.indices {
            stats.verifications += 1
            do {
                let plaintext = try snapshot.keys!.receivers[key]![index].decrypt(wire)
                stats.decrypted += 1
                return .plaintext(String(decoding: plaintext, as: UTF8.self))
            } catch .badMessageSignature {
                continue
            } catch .predatesKey {
                stats.notAddressed += 1  // sent before this device had the sender's key
                return .unreadable
            } catch {
                fail(id, "\(error)", &out)
                return .unreadable
            }
        }
        return .otherChain
    }

    /// `message.edit`: the new content decrypted like a new message, unless the version
    /// held is this one or a later one (`Snapshot.editedAt`).
    mutating func receiveEdit(_ json: JSONValue, _ out: inout [ClientEffect]) {
        guard let id = json["id"]?.stringValue, var message = snapshot.message(ChatID(id)), let content = json["content"]?.stringValue else { return }
        if message.senderDeviceID == snapshot.deviceID { return }  // our own edit: we know the text
        let editedAt = json["edited_at"]?.stringValue
        if let editedAt, let held = snapshot.editedAt?[message.compactID], ChatTime(held) >= ChatTime(editedAt) { return }
        if snapshot.channels[message.channelID]?.isDM ?? false {
            guard let text = openPairwise(content, id: id, &out) else { return }
            message.text = text
        } else if case .plaintext(let text) = openGroup(content, key: SenderKeyOwner(channel: message.channelID, senderDevice: message.senderDeviceID), id: id, &out) {
            message.text = text
        } else if Base64.decode(content) == nil {
            message.text = content
        }
        message.edited = true
        let edited = message
        _ = snapshot.update(edited.compactID) { stored in
            stored = edited
            return true
        }
        if let editedAt { snapshot.noteEdit(edited.compactID, at: editedAt) }
        out.append(.delivered(message))
    }
}

extension SenderKeyOwner {
    /// Whose chains open a group message: its channel and sender device as the wire names
    /// them (a message naming no device: the empty id).
    init(channel: String, senderDevice: String?) { self.init(channel: ChatID(channel), device: ChatID(senderDevice ?? "")) }
}
