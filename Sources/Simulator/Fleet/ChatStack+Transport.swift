import LabKernel
import SecureChatClient
import SecureChatServer

extension ChatStack {
    /// One-way latency of a device's link now, or nil when it is offline.
    mutating func latency(_ device: Int, fleet: inout Fleet) -> TimeSpan? {
        let profile: LinkProfile
        switch fleet.devices[device].network {
        case .offline: return nil
        case .wifi: profile = fleet.scenario.links.wifi
        case .cellular: profile = fleet.scenario.links.cellular
        }
        let seconds = profile.latency.sample(using: &linkStreams[device, default: SeededGenerator(seed: 0)])
            + fleet.scenario.links.datacenter.latency.sample(using: &linkStreams[device, default: SeededGenerator(seed: 0)])
        return .nanoseconds(Int64(max(0, seconds) * 1e9))
    }

    mutating func schedule(_ transit: ChatStack.Transit, after delay: TimeSpan, now: Instant, queue: inout EventQueue<FleetWorld.Event>, fleet: inout Fleet) {
        let slot = park(transit)
        queue.schedule(.chat(.transit(slot: slot)), at: now + delay)
    }

    /// Feeds a client one input and carries out what it asks.
    mutating func feed(_ device: Int, _ input: ClientInput, now: Instant, queue: inout EventQueue<FleetWorld.Event>, fleet: inout Fleet) {
        // Out of the table while it runs, so its storage stays uniquely referenced and
        // mutates in place (a copy left behind would make every change copy it).
        guard var client = self.clients.removeValue(forKey: device) else { return }
        let effects = client.handle(input, now: now)
        let deadline = client.nextDeadline
        clients[device] = client
        // One pending wake-up per client, at its earliest deadline (a later one replaces it).
        if deadline != timerAt[device] {
            timerAt[device] = deadline
            let generation = (timerGeneration[device] ?? 0) &+ 1
            timerGeneration[device] = generation
            if let deadline { queue.schedule(.chat(.timer(device: UInt32(device), generation: generation)), at: max(now, deadline)) }
        }
        for effect in effects {
            switch effect {
            case .request(let id, var request):
                // Each phone is its own client address, as the server's per-address limits expect.
                request.peer = "device-\(device)"
                if let latency = latency(device, fleet: &fleet) {
                    schedule(.request(device: device, id: id, request), after: latency, now: now, queue: &queue, fleet: &fleet)
                } else {
                    schedule(.input(device: device, .transportFailed(id: id)), after: .zero, now: now, queue: &queue, fleet: &fleet)
                }
            case .openSocket(let ticket):
                if let latency = latency(device, fleet: &fleet) {
                    schedule(.connect(device: device, ticket: ticket), after: latency, now: now, queue: &queue, fleet: &fleet)
                } else {
                    schedule(.input(device: device, .socketClosed(code: 1006)), after: .zero, now: now, queue: &queue, fleet: &fleet)
                }
            case .socketSend(let text):
                if let latency = latency(device, fleet: &fleet) { schedule(.frame(device: device, text), after: latency, now: now, queue: &queue, fleet: &fleet) }
            case .closeSocket:
                if let connection = connectionOf.removeValue(forKey: device) {
                    deviceOfConnection[connection] = nil
                    server.disconnect(connection)
                }
            case .delivered(let message):
                delivered(message, on: device, now: now, fleet: &fleet)
            case .surfaced(let error):
                if case .decryptionFailed(let id, let reason) = error, firstFailure[device] == nil {
                    firstFailure[device] = "message \(id): \(reason)"
                }
            case .channelAdded, .channelRemoved, .invited, .typing, .presence, .historyLoaded, .loggedOut:
                break
            }
        }
    }

    mutating func timerFired(_ device: Int, generation: UInt32, now: Instant, queue: inout EventQueue<FleetWorld.Event>, fleet: inout Fleet) {
        guard self.timerGeneration[device] == generation else { return }  // a later deadline replaced it
        timerAt[device] = nil
        feed(device, .timerFired, now: now, queue: &queue, fleet: &fleet)
    }

    /// A message reached its reader (or its sender's acknowledgement came back).
    mutating func delivered(_ message: ChatClientMessage, on device: Int, now: Instant, fleet: inout Fleet) {
        let key = ChatStack.original(message.text)
        guard var record = sent[key] else { return }
        if let retired = retiredAt[device], let invariant = invariants.removedReadNothing {
            fleet.invariants.check(invariant, record.at <= retired,
                             "device \(device), removed at \(retired), decrypted \(message.text) sent at \(record.at)")
        }
        let kind = record.group ? 1 : 0
        if message.senderDeviceID == clients[device]?.deviceID {
            guard !record.acked else { return }
            record.acked = true
            fleet.recorder.add(metrics.messages[kind])
            fleet.recorder.observe(metrics.ackLatency[kind], UInt64(max(0, (now - record.at).nanoseconds)))
        } else if record.pending.remove(device) != nil {
            fleet.recorder.observe(metrics.deliveryLatency[kind], UInt64(max(0, (now - record.at).nanoseconds)))
        }
        sent[key] = record
    }

    mutating func arrived(_ slot: UInt32, now: Instant, queue: inout EventQueue<FleetWorld.Event>, fleet: inout Fleet) {
        guard let transit = self.transits.removeValue(forKey: slot) else { return }
        switch transit {
        case .input(let device, let input):
            feed(device, input, now: now, queue: &queue, fleet: &fleet)
        case .request(let device, let id, let request):
            let reply = server.handle(request, now: now)
            if reply.response.status == 201, request.method == "POST", request.path.hasSuffix("/keys/upload") { keysAt[device] = now }
            serverEnded(request, by: device, reply.response, now: now, fleet: &fleet)
            route(reply.outputs, now: now, queue: &queue, fleet: &fleet)
            if let latency = latency(device, fleet: &fleet) {
                schedule(.input(device: device, .response(id: id, reply.response)), after: latency, now: now, queue: &queue, fleet: &fleet)
            } else {
                feed(device, .transportFailed(id: id), now: now, queue: &queue, fleet: &fleet)
            }
        case .connect(let device, let ticket):
            switch server.connect(ticket: ticket, now: now) {
            case .accepted(let connection):
                guard let latency = latency(device, fleet: &fleet) else {
                    server.disconnect(connection)
                    return feed(device, .socketClosed(code: 1006), now: now, queue: &queue, fleet: &fleet)
                }
                connectionOf[device] = connection
                deviceOfConnection[connection] = device
                schedule(.input(device: device, .socketOpened), after: latency, now: now, queue: &queue, fleet: &fleet)
            case .refused(let code, _):
                feed(device, .socketClosed(code: code), now: now, queue: &queue, fleet: &fleet)
            }
        case .frame(let device, let text):
            guard let connection = connectionOf[device] else { return }
            route(server.receive(connection, text: text, now: now), now: now, queue: &queue, fleet: &fleet)
        }
    }

    /// The server's frames and closes, each over its device's link.
    mutating func route(_ outputs: [ChatOutput], now: Instant, queue: inout EventQueue<FleetWorld.Event>, fleet: inout Fleet) {
        for output in outputs {
            switch output {
            case .send(let connection, let payload):
                guard let device = deviceOfConnection[connection], let latency = latency(device, fleet: &fleet) else { continue }
                if payload["type"] == "typing.start" { fleet.recorder.add(metrics.typing) }
                // A socket is one ordered stream: a frame never overtakes the one before it.
                let arrival = max(now + latency, socketArrival[device] ?? now)
                socketArrival[device] = arrival
                schedule(.input(device: device, .socketText(payload.canonicalText)), after: arrival - now, now: now, queue: &queue, fleet: &fleet)
            case .close(let connection, let code, _):
                guard let device = deviceOfConnection.removeValue(forKey: connection) else { continue }
                connectionOf[device] = nil
                schedule(.input(device: device, .socketClosed(code: code)), after: .zero, now: now, queue: &queue, fleet: &fleet)
            }
        }
    }

    /// A device went offline: its socket drops (the client schedules its reconnect).
    mutating func networkChanged(_ device: Int, to state: NetworkState, now: Instant, queue: inout EventQueue<FleetWorld.Event>, fleet: inout Fleet) {
        guard state == .offline, true, let connection = connectionOf.removeValue(forKey: device) else { return }
        deviceOfConnection[connection] = nil
        server.disconnect(connection)
        feed(device, .socketClosed(code: 1006), now: now, queue: &queue, fleet: &fleet)
    }

    /// Bucket end: connected devices, and the clients' counters since the last bucket.
    mutating func closeBucket(fleet: inout Fleet) {
        let sim = self
        fleet.recorder.set(sim.metrics.connected, Double(sim.connectionOf.count))
        var decrypted = 0, failures = 0, reconnects = 0, replenished = 0, refreshes = 0
        for (device, client) in sim.clients {
            let before = sim.recordedStats[device] ?? ChatClient.Stats()
            decrypted += client.stats.decrypted - before.decrypted
            failures += client.stats.decryptionFailures - before.decryptionFailures
            reconnects += client.stats.reconnects - before.reconnects
            replenished += client.stats.replenished - before.replenished
            refreshes += client.stats.refreshes - before.refreshes
            recordedStats[device] = client.stats
        }
        fleet.recorder.add(sim.metrics.decrypted, Double(decrypted))
        fleet.recorder.add(sim.metrics.failures, Double(failures))
        fleet.recorder.add(sim.metrics.reconnects, Double(reconnects))
        fleet.recorder.add(sim.metrics.replenished, Double(replenished))
        fleet.recorder.add(sim.metrics.refreshes, Double(refreshes))
    }

    /// End of run: every reader that is connected has read every message sent more than
    /// ten minutes ago; no failures; each sender's order kept; no duplicates; no
    /// plaintext in the server's store.
    mutating func finish(at now: Instant, fleet: inout Fleet) {
        let sim = self
        let ids = sim.invariants
        for (text, record) in sim.sent.sorted(by: { $0.key < $1.key }) where now - record.at > .minutes(10) {
            // Only what the server accepted is expected of readers; what it refused (the user
            // had left by the time the queue sent it) settles as a refusal.
            if record.acked {
                let missing = record.pending.filter { sim.connectionOf[$0] != nil }
                fleet.invariants.check(ids.everyMemberReads, missing.isEmpty, "\(text): connected devices \(missing.sorted()) never decrypted it")
            }
            // Nothing waits for ever in a connected sender's queue.
            let sender = Int(text.split(separator: ".")[1].dropFirst()) ?? -1
            let stuck = !record.acked && sim.connectionOf[sender] != nil
                && (sim.clients[sender]?.snapshot.pending.contains { ChatStack.original($0.text) == text } ?? false)
            fleet.invariants.check(ids.sendsSettle, !stuck, "\(text): still queued at its connected sender \(sender) after \(now - record.at)")
        }
        for (device, client) in sim.clients.sorted(by: { $0.key < $1.key }) {
            fleet.invariants.check(ids.noDecryptionFailure, client.stats.decryptionFailures == 0,
                             "device \(device): \(client.stats.decryptionFailures) messages failed to decrypt (first: \(sim.firstFailure[device] ?? "?"))")
            for channel in client.snapshot.timelines.keys.sorted() {
                let line = client.timeline(channel)
                fleet.invariants.check(ids.noDuplicates, Set(line.map(\.id)).count == line.count, "device \(device): a message twice in \(channel)")
                var last: [String: Int] = [:]
                for message in line {
                    let parts = ChatStack.original(message.text).split(separator: ".")
                    guard parts.count == 3, let n = Int(parts[2]) else { continue }
                    let sender = String(parts[1])
                    fleet.invariants.check(ids.perSenderOrder, n > (last[sender] ?? 0), "device \(device): \(message.text) after \(sender).\(last[sender] ?? 0)")
                    last[sender] = n
                }
            }
        }
        if let invariant = ids.removedReadNothing {
            for (device, retired) in sim.retiredAt.sorted(by: { $0.key < $1.key }) {
                let late = (sim.clients[device].map { client in client.snapshot.channels.keys.flatMap { client.timeline($0) } } ?? [])
                    .filter { (sim.sent[ChatStack.original($0.text)]?.at ?? .zero) > retired }
                fleet.invariants.check(invariant, late.isEmpty, "device \(device), removed at \(retired), holds \(late.map(\.text).sorted().prefix(3))")
            }
        }
        for message in sim.server.state.messages.values.sorted(by: { $0.id < $1.id }) {
            fleet.invariants.check(ids.noPlaintextOnServer, message.protocolVersion == 2 && !message.content.contains(".d"),
                             "message \(message.id) is stored readable")
        }
    }
}
