import AIBridgeClient
import AIBridgeDaemon
import AIBridgeRelay
import AIBridgeWire
import LabKernel

/// The people: users at their desks and on their phones, and what the run checks.
extension BridgeStack {
    /// Provisioning: every daemon dials (0); every phone pairs, one per desk at a time (1);
    /// then desktops follow their day and prompts begin (2).
    mutating func setup(_ phase: UInt8, now: Instant, queue: inout EventQueue<FleetWorld.Event>, fleet: inout Fleet) {
        switch phase {
        case 0:
            for user in desks.indices { feed(daemon: user, .start, now: now, queue: &queue, fleet: &fleet) }
            for user in desks.indices { feed(daemon: user, .openPairing, now: now, queue: &queue, fleet: &fleet) }
        case 1:
            for user in desks.indices {
                for (order, device) in desks[user].phones.enumerated() {
                    queue.schedule(.aiBridge(.repair(device: UInt32(device))), at: now + .seconds(Int64(20 * order)))
                }
            }
        default:
            provisioning = false
            for user in desks.indices { planDay(user, from: now, queue: &queue, fleet: &fleet) }
            guard settings.peakRate > 0 else { return }
            for device in ordered { schedulePrompt(device, after: now, queue: &queue) }
        }
    }

    mutating func schedulePrompt(_ device: Int, after now: Instant, queue: inout EventQueue<FleetWorld.Event>) {
        queue.schedule(.aiBridge(.prompt(device: UInt32(device))), at: now + HourWeights.gap(mean: 86_400 / settings.peakRate, using: &phones[device]!.stream))
    }

    /// Whether a prompt goes out now (the hour's weight, a phone that is on), and its next one.
    mutating func promptDue(_ device: Int, fleet: inout Fleet, now: Instant, queue: inout EventQueue<FleetWorld.Event>) -> Bool {
        schedulePrompt(device, after: now, queue: &queue)
        let hour = HourWeights.hour(at: now, startAt: fleet.scenario.startAt)
        return phones[device]!.stream.nextUnit() < settings.keep(hour: hour) && fleet.devices[device].app != .poweredOff
    }

    /// The user sends a prompt (the app is on screen by now).
    mutating func prompt(_ device: Int, fleet: inout Fleet, now: Instant, queue: inout EventQueue<FleetWorld.Event>) {
        follow(device, fleet: &fleet)
        guard phones[device]!.running else { return }
        let words = 3 + Int(phones[device]!.stream.next(below: 20))
        let message = (["prompt-from-phone-\(device)"] + Array(repeating: "word", count: words - 1)).joined(separator: " ")
        var payload: [String: JSONValue] = ["conversation_id": .string("c-\(device)"), "message": .string(message)]
        if phones[device]!.stream.chance(settings.wholeShare) { payload["stream"] = false }
        phones[device]!.promptWords = words
        feed(device, .send(command: "ai_chat", payload: payload), now: now, queue: &queue, fleet: &fleet)
    }

    /// A phone's client runs while its app is on screen; when the app leaves, what was in
    /// flight is cancelled and the client restarts from its keychain.
    mutating func follow(_ device: Int, fleet: inout Fleet) {
        guard phones[device] != nil else { return }
        let should = provisioning || fleet.devices[device].app == .foreground
        guard should != phones[device]!.running else { return }
        phones[device]!.running = should
        guard !should, let client = clients[device] else { return }
        phones[device]!.session &+= 1
        for id in phones[device]!.started.keys.sorted() {
            guard let exchange = exchanges.first(where: { $0.value.device == device && $0.value.id == id })?.key else { continue }
            exchanges[exchange] = nil
            _ = relay.exchangeAbandoned(exchange)  // its cancel reaches a daemon that may be gone: nothing to carry
        }
        phones[device]!.started = [:]
        phones[device]!.text = [:]
        phones[device]!.timerGeneration &+= 1
        phones[device]!.timerAt = nil
        endpoints.forget(device)
        clients[device] = BridgeClient(snapshot: client.snapshot, config: client.config)
    }

    /// A request ended: its outcome, latency, and (for an answer) whether it is whole.
    mutating func ended(_ device: Int, _ id: Int, error: BridgeError?, value: JSONValue?, now: Instant, queue: inout EventQueue<FleetWorld.Event>,
                        fleet: inout Fleet) {
        guard let started = phones[device]!.started.removeValue(forKey: id) else { return }
        let text = phones[device]!.text.removeValue(forKey: id) ?? ""
        fleet.invariants.check(invariants.nothingHangs, now - started.at <= Self.longestRequest,
                               "device \(device) request \(id) took \(now - started.at)")
        if started.pair {
            let outcome = BridgeOutcome.pairing(error)
            if !provisioning {
                fleet.recorder.add(metrics.pairings[outcome]!)
                if error == nil { fleet.recorder.observe(metrics.pairingTime, UInt64(max(0, (now - started.at).nanoseconds))) }
            }
            if error != nil { scheduleRepair(device, now: now, queue: &queue, fleet: &fleet) }
            return
        }
        let outcome = BridgeOutcome.request(error)
        fleet.recorder.add(metrics.requests[outcome]!)
        fleet.recorder.observe(metrics.latency[outcome]!, UInt64(max(0, (now - started.at).nanoseconds)))
        if error == nil {
            let expected = BridgeDaemon.answer(words: started.words)
            let got = text.isEmpty ? value?["reply"]?.stringValue ?? "" : text
            fleet.invariants.check(invariants.answersWhole, got == expected, "device \(device) request \(id): got \"\(got.prefix(60))\"")
        }
        if error == .unauthorized || error == .notPaired { scheduleRepair(device, now: now, queue: &queue, fleet: &fleet) }
    }

    /// The user will pair this phone again after a while at the desk.
    mutating func scheduleRepair(_ device: Int, now: Instant, queue: inout EventQueue<FleetWorld.Event>, fleet: inout Fleet) {
        guard !phones[device]!.repairPending else { return }
        phones[device]!.repairPending = true
        let delay = provisioning ? 30.0 : settings.repairDelay.sample(using: &phones[device]!.stream)
        queue.schedule(.aiBridge(.repair(device: UInt32(device))), at: now + .milliseconds(max(1_000, Int64(delay * 1_000))))
    }

    /// The user types the desktop's PIN on this phone, if the desktop is awake (else later).
    mutating func repair(_ device: Int, now: Instant, queue: inout EventQueue<FleetWorld.Event>, fleet: inout Fleet) {
        phones[device]!.repairPending = false
        let user = phones[device]!.user
        guard desks[user].awake, desks[user].daemon.isConnected, let pin = desks[user].daemon.session?.pin, phones[device]!.running || provisioning else {
            return scheduleRepair(device, now: now, queue: &queue, fleet: &fleet)
        }
        if !provisioning && clients[device]!.isPaired == false { fleet.recorder.add(metrics.repairs) }
        feed(device, .pair(pin: pin), now: now, queue: &queue, fleet: &fleet)
    }

    // MARK: Desktops

    /// The next wake and sleep of a desktop (its own times; some days it stays closed).
    mutating func planDay(_ user: Int, from now: Instant, queue: inout EventQueue<FleetWorld.Event>, fleet: inout Fleet) {
        let (wake, sleep, closed) = settings.hours.day(from: now, startAt: fleet.scenario.startAt, stream: &desks[user].stream)
        if now >= wake && now < sleep && !closed {
            if !desks[user].awake { desk(user, awake: true, now: now, queue: &queue, fleet: &fleet) }
        } else if desks[user].awake {
            desk(user, awake: false, now: now, queue: &queue, fleet: &fleet)
        }
        if now < wake && !closed { queue.schedule(.aiBridge(.desk(user: UInt32(user), awake: true)), at: wake) }
        queue.schedule(.aiBridge(.desk(user: UInt32(user), awake: false)), at: max(now, sleep) + .seconds(1))
        if settings.restartsPerDay > 0 {
            queue.schedule(.aiBridge(.restart(user: UInt32(user))), at: now + HourWeights.gap(mean: 86_400 / settings.restartsPerDay, using: &desks[user].stream))
        }
    }

    mutating func desk(_ user: Int, awake: Bool, now: Instant, queue: inout EventQueue<FleetWorld.Event>, fleet: inout Fleet) {
        if !awake && !desks[user].awake { return planDay(user, from: now, queue: &queue, fleet: &fleet) }
        guard awake != desks[user].awake else { return }
        desks[user].awake = awake
        feed(daemon: user, awake ? .start : .sleep, now: now, queue: &queue, fleet: &fleet)
        if !awake {
            closeTunnel(user, now: now, queue: &queue, fleet: &fleet)
            planDay(user, from: now, queue: &queue, fleet: &fleet)
        }
    }

    /// The daemon restarts (if the desktop is awake): a new key pair, a new pairing session.
    mutating func restart(_ user: Int, now: Instant, queue: inout EventQueue<FleetWorld.Event>, fleet: inout Fleet) {
        guard desks[user].awake else { return }
        feed(daemon: user, .sleep, now: now, queue: &queue, fleet: &fleet)
        closeTunnel(user, now: now, queue: &queue, fleet: &fleet)
        desks[user].restarts += 1
        fleet.recorder.add(metrics.restarts)
        let userSeed = fleet.deviceSeed(desks[user].phones[0]).child("bridge-desk")
        var identity = userSeed.child("identity").generator()
        desks[user].daemon = try! BridgeDaemon(config: desks[user].daemon.config, identitySeed: identity.bytes(32),
                                               seed: userSeed.child("run-\(desks[user].restarts)"))
        desks[user].timerGeneration &+= 1
        desks[user].timerAt = nil
        feed(daemon: user, .openPairing, now: now, queue: &queue, fleet: &fleet)
        feed(daemon: user, .start, now: now, queue: &queue, fleet: &fleet)
    }

    // MARK: Bucket and run ends

    mutating func closeBucket(fleet: inout Fleet, start: Int64, now: Instant) {
        fleet.recorder.set(metrics.daemonsOnline, Double(relay.state.connectedDaemons.count))
        fleet.recorder.set(metrics.relayUtilisation, serving.pool.utilisation(bucketStart: start, now: now))
        fleet.recorder.set(metrics.relayQueue, Double(serving.pool.queueLength))
    }

    /// The longest a request may take: its first answer's deadline, then an idle deadline
    /// between each of an answer's chunks (a scripted answer has a few dozen).
    static let longestRequest = BridgeClient.Config(relayURL: "").firstAnswer + BridgeClient.Config(relayURL: "").idleLimit * 10

    /// End of run: no request still in flight is older than that.
    mutating func finish(at now: Instant, fleet: inout Fleet) {
        for device in ordered {
            for (id, started) in (phones[device]?.started ?? [:]).sorted(by: { $0.key < $1.key }) {
                fleet.invariants.check(invariants.nothingHangs, now - started.at <= Self.longestRequest, "device \(device) request \(id) in flight since \(started.at)")
            }
        }
    }

    /// What a phone's client has stored (its keychain: the pairing must survive the app).
    func storedFacts(_ device: Int) -> Int { clients[device]?.isPaired == true ? 1 : 0 }
}
