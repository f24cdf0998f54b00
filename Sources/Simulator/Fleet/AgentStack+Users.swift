import AgentRuntimeClient
import AgentRuntimeServer
import AgentRuntimeWire
import LabKernel

/// When a device's agent client runs, what its user does, and what the run checks.
extension AgentStack {
    /// Starts or stops a device's client to match its app: it runs while the app is on
    /// screen.
    mutating func follow(_ device: Int, fleet: inout Fleet, now: Instant, queue: inout EventQueue<FleetWorld.Event>) {
        guard clients[device] != nil else { return }
        let should = fleet.devices[device].app == .foreground
        let running = awakeSince[device] != nil
        if should && !running {
            session[device] = currentSession(device) &+ 1
            awakeSince[device] = now
            // Back on screen: the chat the user is in reconnects and resumes.
            if users[device]!.chatting { feed(device, .restore, now: now, queue: &queue, fleet: &fleet) }
        } else if !should && running {
            stop(device)
        }
    }

    /// The app stops running: the socket drops, the volatile state goes, the snapshot stays.
    mutating func stop(_ device: Int) {
        if let client = clients[device] { clients[device] = AgentClient(snapshot: client.snapshot, config: client.config) }
        session[device] = currentSession(device) &+ 1
        awakeSince[device] = nil
        dropConnection(device)
        links.socketGone(device)
        timerAt[device] = nil
        timerGeneration[device] = (timerGeneration[device] ?? 0) &+ 1
        endpoints.forget(device)
        // The user left: nobody waits for an answer or a round trip any more.
        users[device]!.act = nil
        users[device]!.connectingAt = nil
        users[device]!.inputAt = nil
        users[device]!.answeredAt = [:]
    }

    /// The device the user of `device` starts a chat on (the world opens its app first),
    /// or nil when it is not this time (the hour's weight, a phone that is off).
    mutating func sessionDevice(_ device: Int, fleet: inout Fleet, now: Instant, queue: inout EventQueue<FleetWorld.Event>) -> Int? {
        scheduleSession(device, after: now, queue: &queue)
        let hour = HourWeights.hour(at: now, startAt: fleet.scenario.startAt)
        guard users[device]!.stream.nextUnit() < settings.keep(hour: hour), fleet.devices[device].app != .poweredOff else { return nil }
        return device
    }

    /// A user starts a chat on a workflow of the mix (the app is on screen by now).
    mutating func startChat(_ device: Int, fleet: inout Fleet, now: Instant, queue: inout EventQueue<FleetWorld.Event>) {
        // Mid-chat, the user comes back to it (the client resumed when the app opened).
        guard awakeSince[device] != nil, !users[device]!.chatting else { return }
        let total = settings.mix.reduce(0) { $0 + $1.weight }
        var draw = users[device]!.stream.nextUnit() * total
        var workflow = settings.mix[0].workflow.name
        for (candidate, weight) in settings.mix {
            if draw < weight { workflow = candidate.name; break }
            draw -= weight
        }
        users[device]!.chatting = true
        users[device]!.workflow = workflow
        users[device]!.inputs = 0
        users[device]!.act = nil
        users[device]!.chatStartedAt = nil
        fleet.recorder.add(metrics.chats[workflow]!)
        feed(device, clients[device]!.activeChat == nil ? .start(workflow: workflow) : .startNew(workflow: workflow), now: now, queue: &queue, fleet: &fleet)
    }

    /// What the client told the app: the user reacts, the run measures and checks.
    mutating func observe(_ effect: AgentClientEffect, on device: Int, now: Instant, queue: inout EventQueue<FleetWorld.Event>, fleet: inout Fleet) {
        switch effect {
        case .chatReady:
            users[device]!.chatStartedAt = now
            if users[device]!.stream.chance(settings.uploadShare) {
                let size = 1_024 + Int(users[device]!.stream.next(below: 63 * 1_024))
                feed(device, .upload(filename: "photo.jpg", contentType: "image/jpeg", bytes: [UInt8](repeating: 0x5A, count: size), intent: "context"),
                     now: now, queue: &queue, fleet: &fleet)
            }
        case .applied(let event, let replayed):
            applied(event, replayed: replayed, on: device, now: now, fleet: &fleet)
        case .toolCall(let prompt):
            guard prompt.awaitsResponse else { break }
            plan(prompt.display == "composer" ? .input : .respond(toolCall: prompt.id), device, now: now, queue: &queue)
        case .toolCallResolved(let id):
            if users[device]!.act == .respond(toolCall: id) { users[device]!.act = nil }
        case .inputRequested:
            plan(.input, device, now: now, queue: &queue)
        case .runCompleted:
            guard users[device]!.chatting else { break }
            users[device]!.chatting = false
            users[device]!.act = nil
            let workflow = users[device]!.workflow
            fleet.recorder.add(metrics.completed[workflow]!)
            if let started = users[device]!.chatStartedAt {
                fleet.recorder.observe(metrics.runDuration[workflow]!, UInt64(max(0, (now - started).nanoseconds)))
            }
        case .resumed(let replayed, _):
            fleet.recorder.observe(metrics.resumeReplayed, UInt64(replayed))
            if let at = users[device]!.connectingAt {
                fleet.recorder.observe(metrics.resumeTime, UInt64(max(0, (now - at).nanoseconds)))
                users[device]!.connectingAt = nil
            }
            checkTimeline(device, whole: false, fleet: &fleet)
            // What the user sees now that the chat is back on screen.
            if let chat = clients[device]?.activeChat, users[device]!.act == nil, !chat.completed {
                if let call = chat.awaitingToolCall { plan(.respond(toolCall: call), device, now: now, queue: &queue) }
                else if chat.inputRequested { plan(.input, device, now: now, queue: &queue) }
            }
        case .request, .openSocket, .socketSend, .closeSocket, .uploaded, .surfaced, .authRequired:
            break
        }
    }

    /// An event entered the timeline: in index order, and the latencies it ends.
    mutating func applied(_ event: RuntimeEnvelope, replayed: Bool, on device: Int, now: Instant, fleet: inout Fleet) {
        let chat = clients[device]?.activeChat
        fleet.invariants.check(invariants.appliedInOrder, event.index == chat?.lastIndex && chat?.timeline.count == (chat?.lastIndex ?? -2) + 1,
                               "device \(device): applied index \(event.index ?? -1) with \(chat?.timeline.count ?? 0) events in its timeline")
        guard !replayed else { return }
        if event.type == .text, event.data["source"] == "agent", let at = users[device]!.inputAt {
            fleet.recorder.observe(metrics.firstChunk, UInt64(max(0, (now - at).nanoseconds)))
            users[device]!.inputAt = nil
        }
        if event.type == .toolResponse, let id = event.data["tool_call_id"]?.stringValue, let at = users[device]!.answeredAt.removeValue(forKey: id) {
            fleet.recorder.observe(metrics.toolResponseTime, UInt64(max(0, (now - at).nanoseconds)))
        }
    }

    /// The user will do `act` after their think time (unless they already mean to).
    mutating func plan(_ act: Act, _ device: Int, now: Instant, queue: inout EventQueue<FleetWorld.Event>) {
        guard users[device]!.chatting, users[device]!.act == nil else { return }
        if act == .input && users[device]!.inputs >= settings.inputsPerChat {
            users[device]!.chatting = false  // they have said what they came to say
            return
        }
        let think = act == .input ? settings.thinkTime : settings.toolThinkTime
        let seconds = think.sample(using: &users[device]!.stream)
        users[device]!.act = act
        users[device]!.actGeneration &+= 1
        queue.schedule(.agent(.act(device: UInt32(device), generation: users[device]!.actGeneration)),
                       at: now + .milliseconds(max(1, Int64(seconds * 1_000))))
    }

    /// The think time is over: the user types (or answers the tool call) if the app is
    /// still on screen; an action made offline waits in the client's queue.
    mutating func act(_ device: Int, generation: UInt32, now: Instant, queue: inout EventQueue<FleetWorld.Event>, fleet: inout Fleet) {
        guard users[device]!.actGeneration == generation, let act = users[device]!.act else { return }
        users[device]!.act = nil
        guard awakeSince[device] != nil, users[device]!.chatting else { return }
        fleet.recorder.add(metrics.inputs)
        switch act {
        case .input:
            users[device]!.inputs += 1
            users[device]!.inputAt = now
            feed(device, .submit(text: "d\(ordinal[device]!) says \(users[device]!.inputs)"), now: now, queue: &queue, fleet: &fleet)
        case .respond(let id):
            users[device]!.answeredAt[id] = now
            feed(device, .respond(toolCallID: id, response: ["text": "ok", "approved": true]), now: now, queue: &queue, fleet: &fleet)
        }
    }

    /// A client's timeline is the server's transcript up to its last index (and, `whole`,
    /// all of it).
    mutating func checkTimeline(_ device: Int, whole: Bool, fleet: inout Fleet) {
        guard let chat = clients[device]?.activeChat else { return }
        let transcript = server.state.transcripts[chat.chatID] ?? []
        let prefix = chat.timeline.count <= transcript.count && transcript[..<chat.timeline.count].elementsEqual(chat.timeline)
        let complete = !whole || chat.timeline.count == transcript.count
        fleet.invariants.check(invariants.timelineMatches, prefix && complete,
                               "device \(device), chat \(chat.chatID): \(chat.timeline.count) events applied, the server has \(transcript.count)"
                               + (prefix ? "" : "; they differ"))
    }

    /// What a device's client has stored: its events and its actions still to go out.
    func storedFacts(_ device: Int) -> (events: Int, pending: Int) {
        guard let chats = clients[device]?.snapshot.chats else { return (0, 0) }
        return chats.values.reduce((0, 0)) { ($0.0 + $1.timeline.count, $0.1 + $1.pending.count) }
    }

    /// Bucket end: connected clients and the server's load.
    mutating func closeBucket(fleet: inout Fleet, start: Int64, now: Instant) {
        fleet.recorder.set(metrics.connected, Double(connectionOf.count))
        fleet.recorder.set(metrics.serverUtilisation, serving.pool.utilisation(bucketStart: start, now: now))
        fleet.recorder.set(metrics.serverQueue, Double(serving.pool.queueLength))
    }

    /// A client connected and quiet this long at the end has everything the server sent.
    static let caughtUpAfter: TimeSpan = .seconds(30)

    /// End of run: every client's timeline is a prefix of its chat's transcript; a client
    /// connected, resumed and quiet has all of it and no action left unacknowledged.
    mutating func finish(at now: Instant, fleet: inout Fleet) {
        for device in agents {
            guard let client = clients[device], client.activeChat != nil else { continue }
            let caughtUp = client.isConnected && (lastFrameAt[device] ?? .zero) <= now - Self.caughtUpAfter
                && !(server.state.chats[client.activeChat!.chatID]?.run != nil)
            checkTimeline(device, whole: caughtUp, fleet: &fleet)
            if caughtUp {
                let pending = client.activeChat!.pending.count
                fleet.invariants.check(invariants.actionsSettle, pending == 0, "device \(device): \(pending) actions never acknowledged while connected")
            }
        }
    }
}
