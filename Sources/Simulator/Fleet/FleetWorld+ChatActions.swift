import LabKernel
import SecureChatClient
import SecureChatServer

/// What chat users do besides sending (`chat.actions`, `chat.churn` in a scenario): add and
/// remove phones, edit and delete their messages, leave groups (and are added back an hour
/// later), page back through history, change presence, log out of one device or of all.
///
/// Fault model for the invariants: a device removed or logged out must decrypt nothing sent
/// after that moment (`chat.removed_devices_read_nothing_after`): the server closes its
/// sockets and revokes its tokens, and senders stop encrypting to it. Messages it had not
/// read yet are no longer expected of it, and a message deleted is no longer expected of
/// anyone. Each action is a Poisson process per user, drawn from the chat world's stream.
extension FleetWorld {
    /// The first occurrence of every action a scenario turns on, for every user.
    mutating func scheduleChatActions(now: Instant, queue: inout EventQueue<Event>) {
        guard let settings = scenario.chat else { return }
        for user in chatSim!.devicesOfUser.indices {
            for (action, rate) in chatRates(settings) where rate > 0 {
                scheduleChatAction(user, action, rate: rate, after: now, queue: &queue)
            }
        }
    }

    func chatRates(_ settings: ChatSettings) -> [(ChatAction, Double)] {
        [(.addDevice, settings.churn.addsPerUserDay), (.removeDevice, settings.churn.removesPerUserDay)] + settings.actions.rates
    }

    mutating func scheduleChatAction(_ user: Int, _ action: ChatAction, rate: Double, after now: Instant, queue: inout EventQueue<Event>) {
        let gap = Distribution.exponential(mean: 86_400 / rate).sample(using: &chatSim!.generator)
        queue.schedule(.chatAction(user: UInt32(user), kind: action.rawValue), at: now + .milliseconds(max(1, Int64(gap * 1_000))))
    }

    mutating func chatAction(_ user: Int, _ action: ChatAction, now: Instant, queue: inout EventQueue<Event>) {
        guard chatSim != nil, let settings = scenario.chat else { return }
        if let rate = chatRates(settings).first(where: { $0.0 == action })?.1, rate > 0 {
            scheduleChatAction(user, action, rate: rate, after: now, queue: &queue)
        }
        let devices = chatSim!.devicesOfUser[user]
        switch action {
        case .addDevice:
            guard let device = devices.first(where: { !chatSim!.active.contains($0) }) else { return }
            count("add_device")
            chatSignIn(device, now: now, queue: &queue)
        case .removeDevice:
            let active = devices.filter { chatSim!.active.contains($0) && chatSim!.clients[$0]?.deviceID != nil }
            guard active.count >= 2, let actor = chatConnectedDevice(of: user), let victim = active.last(where: { $0 != actor }),
                  let id = chatSim!.clients[victim]?.deviceID else { return }
            count("remove_device")
            // The victim is retired when the server removes it (the request may be lost).
            chatInput(actor, .removeDevice(deviceID: id), now: now, queue: &queue)
        case .leave:
            let groups = (chatSim!.groupsOfUser[user] ?? []).filter { chatSim!.groupChannel[$0] != nil }
            guard let device = chatConnectedDevice(of: user), !groups.isEmpty else { return }
            let group = groups[Int(chatSim!.generator.next(below: UInt64(groups.count)))]
            let channel = chatSim!.groupChannel[group]!
            count("leave")
            chatSim!.groupsOfUser[user]?.removeAll { $0 == group }
            // What the user's devices had not read is forgotten when the server has them leave.
            chatInput(device, .leave(channelID: channel), now: now, queue: &queue)
            chatFollow(.rejoin(user: user, group: group), at: now + .hours(1), queue: &queue)
        case .history:
            guard let device = chatConnectedDevice(of: user),
                  let channels = chatSim!.clients[device]?.snapshot.channels.keys.sorted(), !channels.isEmpty else { return }
            count("history")
            chatInput(device, .loadOlder(channelID: channels[Int(chatSim!.generator.next(below: UInt64(channels.count)))]), now: now, queue: &queue)
        case .presence:
            guard let device = chatConnectedDevice(of: user) else { return }
            count("presence")
            chatInput(device, .setPresence(chatSim!.generator.next(below: 2) == 0 ? "online" : "away"), now: now, queue: &queue)
        case .logout, .logoutAll:
            guard let device = chatConnectedDevice(of: user) else { return }
            let leaving = action == .logout ? [device] : devices.filter { chatSim!.active.contains($0) }
            count(action == .logout ? "logout" : "logout_all")
            // This device forgets its tokens at once; the user's others (logout-all) stop
            // when the server has ended their sessions.
            chatRetire(device, now: now)
            for member in leaving {
                let back = TimeSpan.minutes(60 + Int64(chatSim!.generator.next(below: 121)))
                chatFollow(.signIn(device: member), at: now + back, queue: &queue)
            }
            chatInput(device, action == .logout ? .logout : .logoutAll, now: now, queue: &queue)
        }
    }

    mutating func chatFollow(_ followUp: ChatSimulation.FollowUp, at instant: Instant, queue: inout EventQueue<Event>) {
        let slot = chatSim!.nextFollowUp
        chatSim!.nextFollowUp &+= 1
        chatSim!.followUps[slot] = followUp
        queue.schedule(.chatFollowUp(slot: slot), at: instant)
    }

    mutating func chatFollowUp(_ slot: UInt32, now: Instant, queue: inout EventQueue<Event>) {
        guard let followUp = chatSim?.followUps.removeValue(forKey: slot) else { return }
        switch followUp {
        case .rejoin(let user, let group):
            guard let channel = chatSim!.groupChannel[group], let userID = chatUserID(user) else { return }
            let others = chatSim!.groups[group].filter { $0 != user }
            var adder: Int?
            for other in others where adder == nil { adder = chatConnectedDevice(of: other) }
            guard let adder else { return chatFollow(.rejoin(user: user, group: group), at: now + .minutes(10), queue: &queue) }
            count("rejoin")
            chatSim!.groupsOfUser[user, default: []].append(group)
            chatInput(adder, .addMember(channelID: channel, userID: userID), now: now, queue: &queue)
        case .signIn(let device):
            guard !chatSim!.active.contains(device) else { return }
            count("sign_in")
            chatSignIn(device, now: now, queue: &queue)
        }
    }

    /// A phone signs in as a new device of its user: a fresh client (its own stream), a
    /// login, keys, a socket.
    mutating func chatSignIn(_ device: Int, now: Instant, queue: inout EventQueue<Event>) {
        guard let user = chatSim!.userOfDevice[device] else { return }
        let incarnation = (chatSim!.incarnation[device] ?? 0) + 1
        chatSim!.incarnation[device] = incarnation
        let seed = root.child(.server).child("chat").child("device").child(UInt64(device)).child(incarnation)
        chatSim!.clients[device] = ChatClient(snapshot: ChatClient.Snapshot(seed: seed))
        chatSim!.active.insert(device)
        chatSim!.retiredAt[device] = nil
        chatSim!.keysAt[device] = nil
        chatInput(device, .login(username: "user\(user)", password: "correct horse \(user)", deviceName: "d\(device)"), now: now, queue: &queue)
    }

    /// What the server just did that ends a device's reading: a removal (`DELETE
    /// /devices/{id}`), a logout of every device of the caller, or the user leaving a group.
    mutating func chatServerEnded(_ request: HTTPRequestMessage, by device: Int, _ response: HTTPResponseMessage, now: Instant) {
        guard response.status == 204, let user = chatSim!.userOfDevice[device] else { return }
        let path = request.path
        let segments = request.segments
        if request.method == "POST", segments.count == 5, segments[2] == "channels", segments[4] == "leave" {
            for member in chatSim!.devicesOfUser[user] { chatForget(member, in: segments[3]) }
        } else if request.method == "DELETE", path.hasPrefix("/api/v1/devices/") {
            let removed = String(path.dropFirst("/api/v1/devices/".count))
            if let victim = chatSim!.devicesOfUser[user].first(where: { chatSim!.clients[$0]?.deviceID == removed }), chatSim!.active.contains(victim) {
                chatRetire(victim, now: now)
            }
        } else if request.method == "POST", path == "/api/v1/auth/logout-all" {
            for member in chatSim!.devicesOfUser[user] where chatSim!.active.contains(member) { chatRetire(member, now: now) }
        }
    }

    /// A device stops being its user's (removed, or logged out): from now on it must read
    /// nothing new, and nothing it had not read is expected of it.
    mutating func chatRetire(_ device: Int, now: Instant) {
        chatSim!.active.remove(device)
        chatSim!.retiredAt[device] = now
        chatSim!.keysAt[device] = nil
        for text in chatSim!.sent.keys where chatSim!.sent[text]!.pending.contains(device) { chatSim!.sent[text]!.pending.remove(device) }
        // What it had not got out yet goes with it (logging out drops the outbox).
        let prefix = ".d\(device)."
        for (text, record) in chatSim!.sent where !record.acked && text.contains(prefix) { chatSim!.sent[text] = nil }
    }

    /// The device no longer has to read what was sent in `channel` (its user left).
    mutating func chatForget(_ device: Int, in channel: String) {
        for text in chatSim!.sent.keys where chatSim!.sent[text]!.channel == channel && chatSim!.sent[text]!.pending.contains(device) {
            chatSim!.sent[text]!.pending.remove(device)
        }
    }

    /// Instead of a new message, sometimes an edit or a deletion of the device's latest
    /// own message in the channel (`editShare`, `deleteShare`). True when it did one.
    mutating func chatEditOrDelete(_ device: Int, channel: String, now: Instant, queue: inout EventQueue<Event>) -> Bool {
        guard let actions = scenario.chat?.actions, actions.editShare.numerator > 0 || actions.deleteShare.numerator > 0,
              let client = chatSim!.clients[device],
              let own = client.timeline(channel).last(where: { $0.senderDeviceID == client.deviceID && !$0.deleted && !$0.edited }) else { return false }
        if chatSim!.generator.chance(actions.editShare) {
            count("edit")
            chatInput(device, .edit(messageID: own.id, text: own.text + ChatSimulation.editMark), now: now, queue: &queue)
            return true
        }
        if chatSim!.generator.chance(actions.deleteShare) {
            count("delete")
            chatSim!.sent[own.text] = nil  // a deleted message is expected of nobody
            chatInput(device, .delete(messageID: own.id), now: now, queue: &queue)
            return true
        }
        return false
    }

    /// Every device that should read a message sent now to `channel`: active devices of its
    /// members (the server's, now), with keys and membership older than `readerGrace`.
    mutating func chatReaders(of channel: String, sender: Int, now: Instant) -> Set<Int> {
        let grace = ChatSimulation.readerGrace
        var readers: Set<Int> = []
        for (userID, membership) in chatSim!.server.state.members[channel] ?? [:] where now - membership.joinedAt >= grace {
            guard let user = chatUserIndex(userID) else { continue }
            for device in chatSim!.devicesOfUser[user] where device != sender && chatSim!.active.contains(device) {
                if let keys = chatSim!.keysAt[device], now - keys >= grace { readers.insert(device) }
            }
        }
        return readers
    }

    /// A connected, signed-in device of the user, drawn from the chat stream; nil when none.
    mutating func chatConnectedDevice(of user: Int) -> Int? {
        let online = chatSim!.devicesOfUser[user].filter { chatSim!.active.contains($0) && (chatSim!.clients[$0]?.isConnected ?? false) }
        guard !online.isEmpty else { return nil }
        return online[Int(chatSim!.generator.next(below: UInt64(online.count)))]
    }

    func chatUserID(_ user: Int) -> String? {
        chatSim!.devicesOfUser[user].lazy.compactMap { self.chatSim!.clients[$0]?.userID }.first
    }

    mutating func chatUserIndex(_ userID: String) -> Int? {
        if chatSim!.userIndex[userID] == nil {
            for (index, list) in chatSim!.devicesOfUser.enumerated() {
                for device in list { if let id = chatSim!.clients[device]?.userID { chatSim!.userIndex[id] = index } }
            }
        }
        return chatSim!.userIndex[userID]
    }

    mutating func count(_ kind: String) {
        if let handle = chatSim!.metrics.actions[kind] { recorder.add(handle) }
    }
}
