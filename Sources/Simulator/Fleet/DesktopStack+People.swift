import DesktopBridgeClient
import DesktopBridgeServer
import DesktopBridgeWire
import LabKernel

/// The people: users with their phones at home, their desktops' days, what the run checks.
extension DesktopStack {
    mutating func schedulePrompt(_ device: Int, after now: Instant, queue: inout EventQueue<FleetWorld.Event>) {
        queue.schedule(.desktop(.prompt(device: UInt32(device))), at: now + HourWeights.gap(mean: 86_400 / settings.peakRate, using: &phones[device]!.stream))
    }

    /// Whether a prompt goes out now (the hour's weight, a phone that is on), and its next one.
    mutating func promptDue(_ device: Int, fleet: inout Fleet, now: Instant, queue: inout EventQueue<FleetWorld.Event>) -> Bool {
        schedulePrompt(device, after: now, queue: &queue)
        let hour = HourWeights.hour(at: now, startAt: fleet.scenario.startAt)
        return phones[device]!.stream.nextUnit() < settings.keep(hour: hour) && fleet.devices[device].app != .poweredOff
    }

    /// The user prompts (the app is on screen by now): on a desktop without a session
    /// yet, the phone creates it first; a phone still dialling sends once connected.
    mutating func prompt(_ device: Int, fleet: inout Fleet, now: Instant, queue: inout EventQueue<FleetWorld.Event>) {
        follow(device, fleet: &fleet, now: now, queue: &queue)
        guard phones[device]!.running else { return }
        let words = 2 + Int(phones[device]!.stream.next(below: 12))
        let text = (["prompt"] + Array(repeating: "word", count: words - 1)).joined(separator: " ")
        let desk = phones[device]!.desk
        guard fleet.devices[device].network == .wifi, desks[desk].awake else {
            fleet.recorder.add(metrics.prompts["not_connected"]!)
            return
        }
        guard clients[device]!.isConnected else {
            phones[device]!.pending = text
            return
        }
        guard desks[desk].session != nil else {
            phones[device]!.pending = text
            feed(device, .newSession(cwd: clients[device]!.workingDirectory), now: now, queue: &queue, fleet: &fleet)
            return
        }
        send(device, text, now: now, queue: &queue, fleet: &fleet)
    }

    mutating func send(_ device: Int, _ text: String, now: Instant, queue: inout EventQueue<FleetWorld.Event>, fleet: inout Fleet) {
        guard let session = desks[phones[device]!.desk].session else { return }
        phones[device]!.promptAt = now
        feed(device, .prompt(session: session, text: text), now: now, queue: &queue, fleet: &fleet)
    }

    /// The user cancels the turn they started, if it still runs and they are still connected.
    mutating func cancel(_ desk: Int, turn: UInt32, now: Instant, queue: inout EventQueue<FleetWorld.Event>, fleet: inout Fleet) {
        guard desks[desk].turns == turn, let running = desks[desk].turn, let session = desks[desk].session,
              clients[running.device]!.isConnected else { return }
        feed(running.device, .cancel(session: session, asRequest: clients[running.device]!.config.dialect == .legacy), now: now, queue: &queue, fleet: &fleet)
    }

    /// The client runs while its app is on screen; LAN-first, the app dials its desktop
    /// only while on Wi-Fi (`networkChanged` dials when the Wi-Fi comes back).
    mutating func follow(_ device: Int, fleet: inout Fleet, now: Instant, queue: inout EventQueue<FleetWorld.Event>) {
        guard phones[device] != nil else { return }
        let should = fleet.devices[device].app == .foreground
        guard should != phones[device]!.running else { return }
        phones[device]!.running = should
        if !should {
            phones[device]!.pending = nil
            feed(device, .suspend, now: now, queue: &queue, fleet: &fleet)
        } else if fleet.devices[device].network == .wifi {
            feed(device, .connect, now: now, queue: &queue, fleet: &fleet)
        }
    }

    /// A phone's timeline changed: it must still be its desktop's history, update for
    /// update; the prompting phone's first answer chunk is the turn's first-chunk time.
    mutating func timelineChanged(_ device: Int, _ session: String, now: Instant, fleet: inout Fleet) {
        let desk = phones[device]!.desk
        guard let last = clients[device]!.timelines[session]?.last else { return }
        let count = clients[device]!.timelines[session]!.count
        let history = desks[desk].bridge.state.history[session] ?? []
        let matches = count <= history.count && last.seq == count && history[count - 1].seq == last.seq && Self.same(history[count - 1].update, last.update)
        fleet.invariants.check(invariants.timelineIsHistory, matches, "device \(device) session \(session): update \(count) (seq \(last.seq), \(last.update.kind)) is not the desktop's (\(history.count) updates\(count <= history.count ? ", there seq \(history[count - 1].seq) \(history[count - 1].update.kind)" : ""))")
        guard case .agentMessageChunk = last.update else { return }
        fleet.recorder.add(metrics.chunks)
        if let turn = desks[desk].turn, turn.device == device, !turn.firstChunk {
            desks[desk].turn!.firstChunk = true
            fleet.recorder.observe(metrics.firstChunk, UInt64(max(0, (now - turn.at).nanoseconds)))
        }
    }

    /// The same update as the phone renders it (the 0.2 dialect carries no tool kind).
    static func same(_ a: SessionUpdate, _ b: SessionUpdate) -> Bool { DesktopClient.line(a) == DesktopClient.line(b) }

    /// After a rebuild the whole timeline is compared.
    mutating func checkWhole(_ device: Int, _ session: String, fleet: inout Fleet) {
        let timeline = clients[device]!.timelines[session] ?? []
        let history = desks[phones[device]!.desk].bridge.state.history[session] ?? []
        let matches = timeline.count <= history.count && zip(timeline, history).allSatisfy { $0.seq == $1.seq && Self.same($1.update, $0.update) }
        fleet.invariants.check(invariants.timelineIsHistory, matches, "device \(device) session \(session): rebuilt timeline differs from the desktop's")
    }

    // MARK: Desktops

    /// The next wake and sleep of a desktop.
    mutating func planDay(_ desk: Int, from now: Instant, queue: inout EventQueue<FleetWorld.Event>, fleet: inout Fleet) {
        let (wake, sleep, closed) = settings.hours.day(from: now, startAt: fleet.scenario.startAt, stream: &desks[desk].stream)
        if now >= wake && now < sleep && !closed {
            if !desks[desk].awake { self.desk(desk, awake: true, now: now, queue: &queue, fleet: &fleet) }
        } else if desks[desk].awake {
            self.desk(desk, awake: false, now: now, queue: &queue, fleet: &fleet)
        }
        if now < wake && !closed { queue.schedule(.desktop(.desk(desk: UInt32(desk), awake: true)), at: wake) }
        queue.schedule(.desktop(.desk(desk: UInt32(desk), awake: false)), at: max(now, sleep) + .seconds(1))
    }

    /// A desktop wakes (phones on screen dial again) or sleeps (its turns end, its phones drop).
    mutating func desk(_ desk: Int, awake: Bool, now: Instant, queue: inout EventQueue<FleetWorld.Event>, fleet: inout Fleet) {
        if !awake && !desks[desk].awake { return planDay(desk, from: now, queue: &queue, fleet: &fleet) }
        guard awake != desks[desk].awake else { return }
        desks[desk].awake = awake
        if awake {
            for device in desks[desk].phones where phones[device]!.running && clients[device]!.link == .gaveUp {
                feed(device, .connect, now: now, queue: &queue, fleet: &fleet)
            }
            return
        }
        let reply = desks[desk].bridge.sleep(now: now)
        desks[desk].connection = [:]
        carryOut(desk, reply, now: now, queue: &queue, fleet: &fleet)
        for device in desks[desk].phones { drop(device, now: now, queue: &queue, fleet: &fleet) }
        planDay(desk, from: now, queue: &queue, fleet: &fleet)
    }

    // MARK: Bucket and run ends

    mutating func closeBucket(fleet: inout Fleet) {
        fleet.recorder.set(metrics.connected, Double(ordered.filter { clients[$0]!.isConnected }.count))
        fleet.recorder.set(metrics.awake, Double(desks.filter(\.awake).count))
    }

    /// End of run: every connected phone that is not waiting for anything holds its
    /// desktop's whole history.
    mutating func finish(at now: Instant, fleet: inout Fleet) {
        for device in ordered where clients[device]!.isConnected && clients[device]!.pendingRequests == 0 {
            for session in clients[device]!.timelines.keys.sorted() { checkWhole(device, session, fleet: &fleet) }
        }
    }

    /// What a phone's app has stored: the updates of its timelines.
    func storedFacts(_ device: Int) -> Int { clients[device]?.timelines.values.reduce(0) { $0 + $1.count } ?? 0 }
}
