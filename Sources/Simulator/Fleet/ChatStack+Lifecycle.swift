import LabKernel
import SecureChatClient
import SecureChatServer

/// When a device's chat client runs, what stops it, and what wakes it: the app on screen,
/// a push, a user who opens the app to write.
extension ChatStack {
    /// Pushes to one device within this long collapse into one (a platform collapse id).
    static let pushCollapse: TimeSpan = .seconds(60)

    /// Whether a device's client should run now.
    func shouldRun(_ device: Int, fleet: Fleet) -> Bool {
        guard clients[device] != nil, active.contains(device) else { return false }
        let phone = fleet.devices[device]
        if provisioning { return phone.app != .poweredOff }
        return phone.app == .foreground || (phone.tickLoopRunning && pushWindow.contains(device))
    }

    /// Starts or stops a device's client to match its app (after a lifecycle change, a
    /// background window opening or closing, a push, a sign-in).
    mutating func follow(_ device: Int, fleet: inout Fleet, now: Instant, queue: inout EventQueue<FleetWorld.Event>) {
        guard clients[device] != nil else { return }
        if !fleet.devices[device].tickLoopRunning { pushWindow.remove(device) }
        let running = awakeSince[device] != nil
        let should = shouldRun(device, fleet: fleet)
        if should && !running {
            start(device, fleet: &fleet, now: now, queue: &queue)
        } else if !should && running {
            stop(device, fleet: &fleet, now: now)
        } else if should && catchingUp.contains(device) && fleet.devices[device].app == .foreground {
            // The person opened the app during a push's window: the client connects now.
            catchingUp.remove(device)
            feed(device, .start, now: now, queue: &queue, fleet: &fleet)
        }
    }

    /// A client run begins, restored from what the app stored: a signed-in client resumes
    /// its session (`.start`), or in a push's background window fetches what its channels
    /// got (`.catchUp`: no socket, as a platform's background fetch); one that is not
    /// signed in signs in.
    mutating func start(_ device: Int, fleet: inout Fleet, now: Instant, queue: inout EventQueue<FleetWorld.Event>) {
        session[device] = currentSession(device) &+ 1
        awakeSince[device] = now
        lastPushAt[device] = nil
        guard let client = clients[device], let user = userOfDevice[device] else { return }
        if client.isSignedIn && !provisioning && fleet.devices[device].app != .foreground {
            catchingUp.insert(device)
            feed(device, .catchUp, now: now, queue: &queue, fleet: &fleet)
        } else if client.isSignedIn {
            feed(device, .start, now: now, queue: &queue, fleet: &fleet)
        } else if !provisioning && fleet.devices[device].app == .foreground {
            // Signing in needs the person: it waits for the app on screen.
            feed(device, .login(username: "user\(user)", password: "correct horse \(user)", deviceName: "d\(ordinal[device]!)"), now: now, queue: &queue, fleet: &fleet)
        }
    }

    /// The server ended a device's session (against the user's will unless `asked`).
    mutating func sessionEnded(_ device: Int, asked: Bool, fleet: inout Fleet) {
        if !asked { fleet.recorder.add(metrics.sessionsLost) }
        unaddress(device)
    }

    /// The app stops running (suspended, killed, out of battery): the client's volatile
    /// state goes and its socket drops; its snapshot stays, as the app's storage would.
    mutating func stop(_ device: Int, fleet: inout Fleet, now: Instant) {
        recordStats(device, fleet: &fleet)
        if let client = clients[device] {
            statsBefore[device] = (statsBefore[device] ?? ChatClient.Stats()).adding(client.stats)
            clients[device] = ChatClient(snapshot: client.snapshot)
        }
        recordedStats[device] = nil
        session[device] = currentSession(device) &+ 1
        awakeSince[device] = nil
        pushWindow.remove(device)
        catchingUp.remove(device)
        if let connection = connectionOf.removeValue(forKey: device) {
            deviceOfConnection[connection] = nil
            server.disconnect(connection)
        }
        timerAt[device] = nil
        timerGeneration[device] = (timerGeneration[device] ?? 0) &+ 1
        links.socketGone(device)
        awaitingOpening.remove(device)
        endpoints.forget(device)
    }

    /// What a device's client has stored: its messages and the sends still to go out.
    /// `signIn` counts the device's sign-ins: a device signed in anew (after a logout or a
    /// removal) starts from an empty store, whether or not its app ran at that moment.
    func storedFacts(_ device: Int) -> (messages: Int, pending: Int, signIn: UInt64) {
        guard let snapshot = clients[device]?.snapshot else { return (0, 0, incarnation[device] ?? 0) }
        return (snapshot.messageCount, snapshot.pending.count, incarnation[device] ?? 0)
    }

    /// The set-up phases are over: each client now follows its app.
    mutating func provisioned(fleet: inout Fleet, now: Instant, queue: inout EventQueue<FleetWorld.Event>) {
        provisioning = false
        for device in clients.devices { follow(device, fleet: &fleet, now: now, queue: &queue) }
    }

    /// A push reached the phone (any stack's) and the app runs: chat catches up in the
    /// window it opened.
    mutating func pushArrived(_ device: Int, fleet: inout Fleet, now: Instant, queue: inout EventQueue<FleetWorld.Event>) {
        guard clients[device] != nil, fleet.devices[device].tickLoopRunning else { return }
        pushWindow.insert(device)
        // A client already catching up in the background has no socket: it fetches again.
        if catchingUp.contains(device) { return feed(device, .catchUp, now: now, queue: &queue, fleet: &fleet) }
        follow(device, fleet: &fleet, now: now, queue: &queue)
    }

    /// The server stored something a channel's members should see (a message, an edit):
    /// each member device whose client is not running, or runs without a socket (a push's
    /// background catch-up), gets a push.
    mutating func stored(_ request: HTTPRequestMessage, now: Instant, queue: inout EventQueue<FleetWorld.Event>, fleet: inout Fleet) {
        let segments = request.segments
        guard segments.count == 5, segments[2] == "channels", segments[4] == "messages" else { return }
        for (userID, _) in (server.state.members[segments[3]] ?? [:]).sorted(by: { $0.key < $1.key }) {
            guard let user = userIndex(userID, fleet: &fleet) else { continue }
            for device in devicesOfUser[user] where active.contains(device) && (awakeSince[device] == nil || catchingUp.contains(device)) {
                if let last = lastPushAt[device], now - last < Self.pushCollapse { continue }
                lastPushAt[device] = now
                fleet.sendPush(to: device, stack: .chat, at: now, queue: &queue)
            }
        }
    }

    /// The server crashes (or comes back): every socket drops, and what waited for or held
    /// a worker is lost (its clients time out and retry).
    mutating func setServerDown(_ down: Bool, fleet: inout Fleet, now: Instant, queue: inout EventQueue<FleetWorld.Event>) {
        serving.setDown(down, now: now)
        guard down else { return }
        for (device, connection) in connectionOf.sorted(by: { $0.key < $1.key }) {
            server.disconnect(connection)
            deviceOfConnection[connection] = nil
            closeArrives(device, code: 1006, now: now, queue: &queue, fleet: &fleet)
        }
        connectionOf.removeAll()
    }

    /// A user is about to write (Poisson at the peak rate, thinned to the hour's rate):
    /// the phone they write on, one with the app on screen if they have one, else the first
    /// of theirs that is on (the world opens the app on it). Nil: not this time.
    mutating func writer(_ user: Int, fleet: inout Fleet, now: Instant, queue: inout EventQueue<FleetWorld.Event>) -> Int? {
        queue.schedule(.chat(.talk(user: UInt32(user))), at: now + HourWeights.gap(mean: 3_600 / settings.peakRate, using: &userStreams[user]))
        let hour = HourWeights.hour(at: now, startAt: fleet.scenario.startAt)
        guard userStreams[user].nextUnit() < settings.keep(hour: hour) else { return nil }
        let signedIn = devicesOfUser[user].filter { active.contains($0) && clients[$0]?.isSignedIn == true }
        if let open = signedIn.first(where: { awakeSince[$0] != nil && fleet.devices[$0].app == .foreground }) { return open }
        return signedIn.first { fleet.devices[$0].app != .poweredOff }
    }
}

extension ChatClient.Stats {
    /// Field by field, for a device's counters over several client runs.
    func adding(_ other: ChatClient.Stats) -> ChatClient.Stats {
        var sum = self
        sum.decrypted += other.decrypted
        sum.decryptionFailures += other.decryptionFailures
        sum.notAddressed += other.notAddressed
        sum.refreshes += other.refreshes
        sum.refreshRetries += other.refreshRetries
        sum.reconnects += other.reconnects
        sum.replenished += other.replenished
        sum.timeouts += other.timeouts
        sum.senderKeyRotations += other.senderKeyRotations
        sum.deviceSetFetches += other.deviceSetFetches
        sum.handshakes += other.handshakes
        sum.signatures += other.signatures
        sum.verifications += other.verifications
        return sum
    }
}
