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
extension ChatStack {
    /// The first occurrence of every action a scenario turns on, for every user.
    mutating func scheduleActions(now: Instant, queue: inout EventQueue<FleetWorld.Event>, fleet: inout Fleet) {
        for user in devicesOfUser.indices {
            for (action, rate) in rates(settings) where rate > 0 {
                scheduleAction(user, action, rate: rate, after: now, queue: &queue, fleet: &fleet)
            }
        }
    }

    func rates(_ settings: ChatSettings) -> [(ChatAction, Double)] {
        [(.addDevice, settings.churn.addsPerUserDay), (.removeDevice, settings.churn.removesPerUserDay)] + settings.actions.rates
    }

    mutating func scheduleAction(_ user: Int, _ action: ChatAction, rate: Double, after now: Instant, queue: inout EventQueue<FleetWorld.Event>, fleet: inout Fleet) {
        queue.schedule(.chat(.action(user: UInt32(user), kind: action.rawValue)), at: now + HourWeights.gap(mean: 86_400 / rate, using: &userStreams[user]))
    }

    mutating func act(_ user: Int, _ action: ChatAction, now: Instant, queue: inout EventQueue<FleetWorld.Event>, fleet: inout Fleet) {
        if let rate = rates(settings).first(where: { $0.0 == action })?.1, rate > 0 {
            scheduleAction(user, action, rate: rate, after: now, queue: &queue, fleet: &fleet)
        }
        let devices = devicesOfUser[user]
        switch action {
        case .addDevice:
            guard let device = devices.first(where: { !active.contains($0) }) else { return }
            count("add_device", fleet: &fleet)
            signIn(device, now: now, queue: &queue, fleet: &fleet)
        case .removeDevice:
            let active = devices.filter { self.active.contains($0) && clients[$0]?.deviceID != nil }
            guard active.count >= 2, let actor = connectedDevice(of: user, fleet: &fleet), let victim = active.last(where: { $0 != actor }),
                  let id = clients[victim]?.deviceID else { return }
            count("remove_device", fleet: &fleet)
            // The victim is retired when the server removes it (the request may be lost).
            feed(actor, .removeDevice(deviceID: id), now: now, queue: &queue, fleet: &fleet)
        case .leave:
            let groups = (groupsOfUser[user] ?? []).filter { groupChannel[$0] != nil }
            guard let device = connectedDevice(of: user, fleet: &fleet), !groups.isEmpty else { return }
            let group = groups[Int(userStreams[user].next(below: UInt64(groups.count)))]
            let channel = groupChannel[group]!
            count("leave", fleet: &fleet)
            groupsOfUser[user]?.removeAll { $0 == group }
            // What the user's devices had not read is forgotten when the server has them leave.
            feed(device, .leave(channelID: channel), now: now, queue: &queue, fleet: &fleet)
            follow(.rejoin(user: user, group: group), at: now + .hours(1), queue: &queue, fleet: &fleet)
        case .history:
            guard let device = connectedDevice(of: user, fleet: &fleet),
                  let channels = clients[device]?.snapshot.channels.keys.sorted(), !channels.isEmpty else { return }
            count("history", fleet: &fleet)
            feed(device, .loadOlder(channelID: channels[Int(userStreams[user].next(below: UInt64(channels.count)))]), now: now, queue: &queue, fleet: &fleet)
        case .presence:
            guard let device = connectedDevice(of: user, fleet: &fleet) else { return }
            count("presence", fleet: &fleet)
            feed(device, .setPresence(userStreams[user].next(below: 2) == 0 ? "online" : "away"), now: now, queue: &queue, fleet: &fleet)
        case .logout, .logoutAll:
            guard let device = connectedDevice(of: user, fleet: &fleet) else { return }
            let leaving = action == .logout ? [device] : devices.filter { active.contains($0) }
            count(action == .logout ? "logout" : "logout_all", fleet: &fleet)
            // This device forgets its tokens at once; the user's others (logout-all) stop
            // when the server has ended their sessions.
            retire(device, now: now, fleet: &fleet)
            loggingOut.formUnion(leaving.filter { $0 != device })
            for member in leaving {
                let back = TimeSpan.minutes(60 + Int64(userStreams[user].next(below: 121)))
                follow(.signIn(device: member), at: now + back, queue: &queue, fleet: &fleet)
            }
            feed(device, action == .logout ? .logout : .logoutAll, now: now, queue: &queue, fleet: &fleet)
        }
    }

    mutating func follow(_ followUp: ChatStack.FollowUp, at instant: Instant, queue: inout EventQueue<FleetWorld.Event>, fleet: inout Fleet) {
        let slot = nextFollowUp
        nextFollowUp &+= 1
        followUps[slot] = followUp
        queue.schedule(.chat(.followUp(slot: slot)), at: instant)
    }

    mutating func followUp(_ slot: UInt32, now: Instant, queue: inout EventQueue<FleetWorld.Event>, fleet: inout Fleet) {
        guard let followUp = self.followUps.removeValue(forKey: slot) else { return }
        switch followUp {
        case .rejoin(let user, let group):
            guard let channel = groupChannel[group], let userID = userID(user) else { return }
            let others = groups[group].filter { $0 != user }
            var adder: Int?
            for other in others where adder == nil { adder = connectedDevice(of: other, fleet: &fleet) }
            guard let adder else { return follow(.rejoin(user: user, group: group), at: now + .minutes(10), queue: &queue, fleet: &fleet) }
            count("rejoin", fleet: &fleet)
            groupsOfUser[user, default: []].append(group)
            feed(adder, .addMember(channelID: channel, userID: userID), now: now, queue: &queue, fleet: &fleet)
        case .signIn(let device):
            guard !active.contains(device) else { return }
            count("sign_in", fleet: &fleet)
            signIn(device, now: now, queue: &queue, fleet: &fleet)
        }
    }

    /// A phone signs in as a new device of its user: a fresh client (its own stream) that
    /// logs in, uploads keys and connects the next time the app runs (now, if it does).
    mutating func signIn(_ device: Int, now: Instant, queue: inout EventQueue<FleetWorld.Event>, fleet: inout Fleet) {
        guard userOfDevice[device] != nil else { return }
        if awakeSince[device] != nil { stop(device, fleet: &fleet, now: now) }
        let incarnation = (self.incarnation[device] ?? 0) + 1
        self.incarnation[device] = incarnation
        let seed = fleet.deviceSeed(device).child("chat-client").child(incarnation)
        clients[device]?.snapshot.forgetSetAside()
        clients[device] = ChatClient(snapshot: Self.freshSnapshot(seed, settings: settings, archive: timelineArchive, owners: &timelineOwners))
        active.insert(device)
        loggingOut.remove(device)
        retiredAt[device] = nil
        keysAt[device] = nil
        follow(device, fleet: &fleet, now: now, queue: &queue)
    }

    /// What the server just did that ends a device's reading: a removal (`DELETE
    /// /devices/{id}`), a logout of every device of the caller, or the user leaving a group.
    mutating func serverEnded(_ request: HTTPRequestMessage, by device: Int, _ response: HTTPResponseMessage, now: Instant, fleet: inout Fleet) {
        guard response.status == 204, let user = userOfDevice[device] else { return }
        let path = request.path
        let segments = request.segments
        if request.method == "POST", segments.count == 5, segments[2] == "channels", segments[4] == "leave" {
            for member in devicesOfUser[user] { forget(member, in: segments[3], fleet: &fleet) }
        } else if request.method == "DELETE", path.hasPrefix("/api/v1/devices/") {
            let removed = String(path.dropFirst("/api/v1/devices/".count))
            if let victim = devicesOfUser[user].first(where: { clients[$0]?.deviceID == removed }), active.contains(victim) {
                retire(victim, now: now, fleet: &fleet)
            }
        } else if request.method == "POST", path == "/api/v1/auth/logout-all" {
            for member in devicesOfUser[user] where active.contains(member) { retire(member, now: now, fleet: &fleet) }
        }
    }

    /// A device stops being its user's (removed, or logged out): from now on it must read
    /// nothing new, and nothing it had not read is expected of it.
    mutating func retire(_ device: Int, now: Instant, fleet: inout Fleet) {
        active.remove(device)
        retiredAt[device] = now
        unaddress(device)
        sent.dropUnacknowledged(from: ordinal[device]!)
    }

    /// The device's identity is gone from the server: nothing sent to it is expected of it
    /// any more, and it is not addressable until a login uploads new keys.
    mutating func unaddress(_ device: Int) {
        keysAt[device] = nil
        sent.excuse(device)
    }

    /// The device no longer has to read what was sent in `channel` (its user left).
    mutating func forget(_ device: Int, in channel: String, fleet: inout Fleet) {
        sent.excuse(device, in: channel)
    }

    /// Instead of a new message, sometimes an edit or a deletion of the device's latest
    /// own message in the channel (`editShare`, `deleteShare`). True when it did one.
    mutating func editOrDelete(_ device: Int, channel: String, now: Instant, queue: inout EventQueue<FleetWorld.Event>, fleet: inout Fleet) -> Bool {
        let actions = settings.actions
        guard actions.editShare.numerator > 0 || actions.deleteShare.numerator > 0,
              let client = clients[device],
              let own = client.timeline(channel).last(where: { $0.senderDeviceID == client.deviceID && !$0.deleted && !$0.edited }) else { return false }
        guard let user = userOfDevice[device] else { return false }
        if userStreams[user].chance(actions.editShare) {
            count("edit", fleet: &fleet)
            feed(device, .edit(messageID: own.id, text: own.text + ChatStack.editMark), now: now, queue: &queue, fleet: &fleet)
            return true
        }
        if userStreams[user].chance(actions.deleteShare) {
            count("delete", fleet: &fleet)
            sent.forget(own.text)  // a deleted message is expected of nobody
            feed(device, .delete(messageID: own.id), now: now, queue: &queue, fleet: &fleet)
            return true
        }
        return false
    }

    /// Every device that should read a message sent now to `channel`: active devices of its
    /// members (the server's, now), with keys and membership older than `readerGrace`.
    mutating func readers(of channel: String, sender: Int, now: Instant, fleet: inout Fleet) -> Set<Int> {
        let grace = ChatStack.readerGrace
        var readers: Set<Int> = []
        for (userID, membership) in server.state.members[channel] ?? [:] where now - membership.joinedAt >= grace {
            guard let user = userIndex(userID, fleet: &fleet) else { continue }
            for device in devicesOfUser[user] where device != sender && active.contains(device) {
                if let keys = keysAt[device], now - keys >= grace { readers.insert(device) }
            }
        }
        return readers
    }

    /// A connected, signed-in device of the user, drawn from the chat stream; nil when none.
    mutating func connectedDevice(of user: Int, fleet: inout Fleet) -> Int? {
        let online = devicesOfUser[user].filter { active.contains($0) && (clients[$0]?.isConnected ?? false) }
        guard !online.isEmpty else { return nil }
        return online[Int(userStreams[user].next(below: UInt64(online.count)))]
    }

    func userID(_ user: Int) -> String? {
        devicesOfUser[user].lazy.compactMap { self.clients[$0]?.userID }.first
    }

    mutating func userIndex(_ userID: String, fleet: inout Fleet) -> Int? {
        if userIndex[userID] == nil {
            for (index, list) in devicesOfUser.enumerated() {
                for device in list { if let id = clients[device]?.userID { userIndex[id] = index } }
            }
        }
        return userIndex[userID]
    }

    mutating func count(_ kind: String, fleet: inout Fleet) {
        if let handle = metrics.actions[kind] { fleet.recorder.add(handle) }
    }
}
